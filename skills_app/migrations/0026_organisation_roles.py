"""The roles' permissions for the organisation: skill access for skill managers;
groups' policies and people's limits for administrators (lifting a lockout is an action of the
user list, which administrators already have).

The lists are copied here, not imported (see 0009_roles); tests/test_roles.py checks that
`ROLES` matches skills_app/accounts/roles.py. Only adds: a permission an administrator gave a
role's group by hand stays.
"""

from __future__ import annotations

from django.contrib.auth.management import create_permissions
from django.db import migrations

ADDED = {
    "Skill manager": [
        "skills_app.add_skillaccess",
        "skills_app.change_skillaccess",
        "skills_app.delete_skillaccess",
        "skills_app.view_skillaccess",
    ],
    "Administrator": [
        "auth.change_group",
        "skills_app.add_grouppolicy",
        "skills_app.change_grouppolicy",
        "skills_app.view_grouppolicy",
        "skills_app.add_userpolicy",
        "skills_app.change_userpolicy",
        "skills_app.view_userpolicy",
    ],
}
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
    *ADDED["Skill manager"],
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
            *ADDED["Administrator"],
        ]
    )
)
ROLES = {
    "Chatter": [],
    "Skill manager": SKILL_MANAGER,
    "Auditor": AUDITOR,
    "Administrator": ADMINISTRATOR,
}


def add_permissions(apps, schema_editor):
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for name, dotted in ADDED.items():
        group, _ = Group.objects.get_or_create(name=name)
        for item in dotted:
            if name == "Administrator" and item in ADDED["Skill manager"]:
                continue
            app_label, codename = item.split(".", 1)
            group.permissions.add(
                Permission.objects.get(content_type__app_label=app_label, codename=codename)
            )
    # The administrator also holds everything a skill manager does.
    admins = Group.objects.get(name="Administrator")
    for item in ADDED["Skill manager"]:
        app_label, codename = item.split(".", 1)
        admins.permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )


class Migration(migrations.Migration):
    dependencies = [
        ("skills_app", "0025_organisation"),
    ]

    operations = [migrations.RunPython(add_permissions, migrations.RunPython.noop)]
