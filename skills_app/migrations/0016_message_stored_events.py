# The untyped "message" event is now "message.stored" (skills_app.core.events.MessageStored).

from django.db import migrations


def rename_forwards(apps, schema_editor):
    RunEvent = apps.get_model("skills_app", "RunEvent")
    RunEvent.objects.filter(type="message").update(type="message.stored")


def rename_backwards(apps, schema_editor):
    RunEvent = apps.get_model("skills_app", "RunEvent")
    RunEvent.objects.filter(type="message.stored").update(type="message")


class Migration(migrations.Migration):
    dependencies = [
        ("skills_app", "0015_trigger_tests"),
    ]

    operations = [migrations.RunPython(rename_forwards, rename_backwards)]
