from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("skills_app", "0030_stream_pieces"),
    ]

    operations = [
        migrations.AddField(
            model_name="skillpackage",
            name="trigger_gate",
            field=models.BooleanField(
                default=False,
                help_text="On: a version may be submitted for review only once a trigger run on "
                "it has passed every query of the skill's trigger set.",
                verbose_name="trigger tests gate review",
            ),
        ),
    ]
