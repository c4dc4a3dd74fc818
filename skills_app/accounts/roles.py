"""Roles: the four groups an administrator hands out instead of ticking raw permissions.

The groups are created by a data migration (0009_roles) with these permissions; `ROLES` is the
one place the code names them (the `role` command, the admin's user page, the tests that check
the migration made exactly these). A role that needs the admin site also needs staff status, so
granting it sets `is_staff`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import Group, Permission, User
from django.db import transaction


@dataclass(frozen=True, slots=True)
class Role:
    slug: str  # as typed in `manage.py role grant alice auditor`
    name: str  # the group's name
    summary: str
    staff: bool  # needs the admin site
    permissions: tuple[str, ...]  # "app_label.codename"


_SKILL_MANAGER = (
    "skills_app.add_skillpackage",
    "skills_app.change_skillpackage",
    "skills_app.delete_skillpackage",
    "skills_app.view_skillpackage",
    "skills_app.view_skillversion",
    # Review and approve organisation skill versions (registry.review); a reviewer reads the
    # whole package they approve, never a conversation's injected text.
    "skills_app.review_skillversion",
    "skills_app.view_skillreview",
    "skills_app.add_permissionrule",
    "skills_app.change_permissionrule",
    "skills_app.delete_permissionrule",
    "skills_app.view_permissionrule",
    # Which groups may use which organisation skills.
    "skills_app.add_skillaccess",
    "skills_app.change_skillaccess",
    "skills_app.delete_skillaccess",
    "skills_app.view_skillaccess",
)
_AUDITOR = (
    "skills_app.inspect_injected_content",
    "skills_app.view_skillinvocation",
    "skills_app.view_approval",
    "skills_app.view_run",
    "skills_app.view_auditevent",
    "skills_app.view_skillpackage",
    "skills_app.view_skillversion",
    "skills_app.view_permissionrule",
    "skills_app.view_skillreview",
    "skills_app.view_permissiondecision",
)
_ADMINISTRATOR = tuple(
    dict.fromkeys(
        [
            *_SKILL_MANAGER,
            *_AUDITOR,
            "auth.add_user",
            "auth.change_user",
            "auth.delete_user",
            "auth.view_user",
            "auth.view_group",
            # Groups' policies (directory names, models, budgets) and people's limits.
            "auth.change_group",
            "skills_app.add_grouppolicy",
            "skills_app.change_grouppolicy",
            "skills_app.view_grouppolicy",
            "skills_app.add_userpolicy",
            "skills_app.change_userpolicy",
            "skills_app.view_userpolicy",
        ]
    )
)

ROLES: tuple[Role, ...] = (
    Role(
        "chatter",
        "Chatter",
        "Chats with the agent and uploads personal skills. Sees only their own conversations.",
        False,
        (),
    ),
    Role(
        "skill-manager",
        "Skill manager",
        "Uploads skills for everyone, reviews and approves them, activates and rolls back versions, writes permission rules.",
        True,
        _SKILL_MANAGER,
    ),
    Role(
        "auditor",
        "Auditor",
        "Reads the audit: every invocation, the injected text, approvals, exports. Edits nothing.",
        True,
        _AUDITOR,
    ),
    Role(
        "administrator",
        "Administrator",
        "Everything a skill manager and an auditor may do, and manages people and their roles.",
        True,
        _ADMINISTRATOR,
    ),
)

# The permission that opens the audit pages (the Auditor and Administrator roles have it).
AUDIT_PERMISSION = "skills_app.view_skillinvocation"


class RoleError(Exception):
    """A role name that does not exist; the message lists the ones that do."""


def get_role(text: str) -> Role:
    """The role called `text` ("auditor", "Skill manager", "skill_manager"); RoleError otherwise."""
    key = "-".join(text.strip().lower().replace("_", " ").replace("-", " ").split())
    for role in ROLES:
        if key in (role.slug, "-".join(role.name.lower().split())):
            return role
    raise RoleError(f"There is no role {text!r}. Roles: {', '.join(r.slug for r in ROLES)}.")


def role_of_group(name: str) -> Role | None:
    return next((r for r in ROLES if r.name == name), None)


def roles_of(user: User) -> list[Role]:
    """The roles a user holds, in the order of ROLES."""
    names = set(user.groups.values_list("name", flat=True))
    return [r for r in ROLES if r.name in names]


def group_for(role: Role) -> Group:
    """The role's group, made (with its permissions) if it is missing."""
    group = Group.objects.filter(name=role.name).first()
    if group is None:
        ensure_roles()
        group = Group.objects.get(name=role.name)
    return group


def permission_objects(role: Role) -> list[Permission]:
    """The Permission rows of a role."""
    out = []
    for dotted in role.permissions:
        app_label, codename = dotted.split(".", 1)
        out.append(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    return out


def ensure_roles(**kwargs: Any) -> None:
    """Make missing role groups and give them missing permissions (after every migrate/flush).

    Only adds: a permission an administrator added to a role's group stays.
    """
    for role in ROLES:
        group, _ = Group.objects.get_or_create(name=role.name)
        group.permissions.add(*permission_objects(role))


def grant(user: User, role: Role) -> bool:
    """Give `user` the role (and staff status when it needs the admin). False: already held."""
    with transaction.atomic():
        group = group_for(role)
        held = user.groups.filter(pk=group.pk).exists()
        if not held:
            user.groups.add(group)
        if role.staff and not user.is_staff:
            user.is_staff = True
            user.save(update_fields=["is_staff"])
    return not held


def revoke(user: User, role: Role) -> bool:
    """Take the role away; staff status goes too when no remaining role needs it. False: not held."""
    with transaction.atomic():
        group = group_for(role)
        held = user.groups.filter(pk=group.pk).exists()
        if held:
            user.groups.remove(group)
        if user.is_staff and not user.is_superuser and not any(r.staff for r in roles_of(user)):
            user.is_staff = False
            user.save(update_fields=["is_staff"])
    return held


def sync_staff(user: User) -> None:
    """Give staff status to someone whose roles need the admin site (after an admin edit)."""
    if not user.is_staff and any(r.staff for r in roles_of(user)):
        user.is_staff = True
        user.save(update_fields=["is_staff"])


__all__ = [
    "AUDIT_PERMISSION",
    "ROLES",
    "Role",
    "RoleError",
    "get_role",
    "grant",
    "revoke",
    "roles_of",
    "sync_staff",
]
