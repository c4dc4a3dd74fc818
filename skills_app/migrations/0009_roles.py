"""The four roles as groups with their permissions (see skills_app/accounts/roles.py).

The permission lists are copied here, not imported, so this migration means the same thing
whenever it runs; tests/test_roles.py checks that it matches `ROLES`.
"""

from __future__ import annotations

from django.contrib.auth.management import create_permissions
from django.db import migrations

SKILL_MANAGER = [
    "skills_app.add_skillpackage",
    "skills_app.change_skillpackage",
    "skills_app.delete_skillpackage",
    "skills_app.view_skillpackage",
    "skills_app.view_skillversion",
    "skills_app.add_permissionrule",
    "skills_app.change_permissionrule",
    "skills_app.delete_permissionrule",
    "skills_app.view_permissionrule",
]
AUDITOR = [
    "skills_app.inspect_injected_content",
    "skills_app.view_skillinvocation",
    "skills_app.view_approval",
    "skills_app.view_run",
    "skills_app.view_auditevent",
    "skills_app.view_skillpackage",
    "skills_app.view_skillversion",
    "skills_app.view_permissionrule",
]
ADMINISTRATOR = list(
    dict.fromkeys(
        SKILL_MANAGER
        + AUDITOR
        + [
            "auth.add_user",
            "auth.change_user",
            "auth.delete_user",
            "auth.view_user",
            "auth.view_group",
        ]
    )
)
ROLES = {
    "Chatter": [],
    "Skill manager": SKILL_MANAGER,
    "Auditor": AUDITOR,
    "Administrator": ADMINISTRATOR,
}


def create_roles(apps, schema_editor):
    # Permissions are normally made after the last migration (post_migrate); make them now.
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for name, dotted in ROLES.items():
        group, _ = Group.objects.get_or_create(name=name)
        permissions = []
        for item in dotted:
            app_label, codename = item.split(".", 1)
            permissions.append(
                Permission.objects.get(content_type__app_label=app_label, codename=codename)
            )
        group.permissions.set(permissions)


def remove_roles(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=list(ROLES)).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("skills_app", "0008_audit_append_only"),
    ]

    operations = [migrations.RunPython(create_roles, remove_roles)]
