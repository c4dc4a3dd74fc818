"""Groups from the identity provider: the groups claim sets a person's directory-managed groups on
every sign-in (added and removed), roles included.

Only groups whose policy names a `directory_name` follow the directory, and only an exact claim
value selects one: a claim naming a Skillscope group or role ("Administrator") grants nothing
unless an administrator mapped that directory name to it. Groups managed here (no directory name)
are never touched by a sign-in.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone

from skills_app import trail
from skills_app.accounts import roles
from skills_app.models import AuditEvent, GroupPolicy, UserPolicy

# A claim longer than this is cut: no directory sends thousands of groups for one person, and the
# audit keeps what was sent.
MAX_CLAIM_VALUES = 1000
MAX_VALUE_LENGTH = 300


def claim_values(raw: Any) -> list[str]:
    """The group names in a claim as sent: a list of strings, or one string; anything else: none."""
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, (list, tuple)):
        return []
    values = [v for v in raw if isinstance(v, str) and 0 < len(v) <= MAX_VALUE_LENGTH]
    return list(dict.fromkeys(values))[:MAX_CLAIM_VALUES]


def mapped_groups(values: Iterable[str]) -> dict[int, str]:
    """Skillscope group id -> name, for the directory names in `values` (exact matches only)."""
    wanted = [v for v in values if v]
    rows = GroupPolicy.objects.filter(directory_name__in=wanted).exclude(directory_name="")
    return dict(rows.values_list("group_id", "group__name"))


def sync_groups(user: Any, values: list[str], *, source: str) -> tuple[list[str], list[str]]:
    """Make the person's directory-managed groups exactly those the claim maps to.

    Returns (added, removed) group names; both are recorded in the audit with the claim.
    """
    with transaction.atomic():
        managed = set(
            GroupPolicy.objects.exclude(directory_name="").values_list("group_id", flat=True)
        )
        wanted = mapped_groups(values)
        current = set(user.groups.filter(pk__in=managed).values_list("pk", flat=True))
        add = sorted(set(wanted) - current)
        remove = sorted(current - set(wanted))
        names = dict(Group.objects.filter(pk__in=add + remove).values_list("pk", "name"))
        with trail.acting(name=f"identity provider ({source})"):
            if add:
                user.groups.add(*add)
            if remove:
                user.groups.remove(*remove)
        _staff_follows_roles(user)
        UserPolicy.objects.update_or_create(
            user=user,
            defaults={"directory_groups": values, "directory_synced_at": timezone.now()},
        )
        added, removed = [names[g] for g in add], [names[g] for g in remove]
        trail.record(
            AuditEvent.DIRECTORY_SYNCED,
            actor_name=f"identity provider ({source})",
            target=f"user {user.get_username()}",
            claim=values,
            added=added,
            removed=removed,
        )
    return added, removed


def _staff_follows_roles(user: Any) -> None:
    """A role that needs the admin gives staff status; losing the last one takes it (superusers
    keep theirs)."""
    needs = any(r.staff for r in roles.roles_of(user))
    if needs and not user.is_staff:
        user.is_staff = True
        user.save(update_fields=["is_staff"])
    elif not needs and user.is_staff and not user.is_superuser:
        user.is_staff = False
        user.save(update_fields=["is_staff"])
