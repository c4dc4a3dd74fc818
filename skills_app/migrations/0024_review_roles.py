"""The roles' new permissions: skill managers review versions; auditors read reviews and
decisions. Added to the groups 0009_roles made (tests/test_roles.py checks the sum)."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

SKILL_MANAGER = ["skills_app.review_skillversion", "skills_app.view_skillreview"]
AUDITOR = ["skills_app.view_skillreview", "skills_app.view_permissiondecision"]
ADDED = {
    "Skill manager": SKILL_MANAGER,
    "Auditor": AUDITOR,
    "Administrator": list(dict.fromkeys([*SKILL_MANAGER, *AUDITOR])),
}


def add(apps, schema_editor):
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for name, dotted in ADDED.items():
        group = Group.objects.filter(name=name).first()
        if group is None:
            continue
        for item in dotted:
            app_label, codename = item.split(".", 1)
            group.permissions.add(
                Permission.objects.get(content_type__app_label=app_label, codename=codename)
            )


def remove(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for name, dotted in ADDED.items():
        group = Group.objects.filter(name=name).first()
        for item in dotted if group else []:
            app_label, codename = item.split(".", 1)
            group.permissions.remove(
                *Permission.objects.filter(content_type__app_label=app_label, codename=codename)
            )


class Migration(migrations.Migration):
    dependencies = [("skills_app", "0023_permission_decisions")]

    operations = [migrations.RunPython(add, remove)]
