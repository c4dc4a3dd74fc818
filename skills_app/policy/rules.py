"""Which admin permission rules apply to one person: a rule's "applies to" (groups and people).

A rule that names nobody applies to everyone; one that names groups or people applies only to
those people and the members of those groups. The filter runs where rules are loaded
(`permissions.approvals.admin_rules`), so the rule tester, runs and trigger runs agree.
"""

from __future__ import annotations

from collections.abc import Iterable

from skills_app.models import PermissionRule


def audience(rule_ids: Iterable[int]) -> dict[int, tuple[frozenset[int], frozenset[int]]]:
    """rule id -> (group ids, user ids) it is limited to; a rule missing here applies to all."""
    ids = list(rule_ids)
    groups: dict[int, set[int]] = {}
    users: dict[int, set[int]] = {}
    through_groups = PermissionRule.applies_to_groups.through.objects.filter(
        permissionrule_id__in=ids
    )
    for rule_id, group_id in through_groups.values_list("permissionrule_id", "group_id"):
        groups.setdefault(rule_id, set()).add(group_id)
    through_users = PermissionRule.applies_to_users.through.objects.filter(
        permissionrule_id__in=ids
    )
    for rule_id, user_id in through_users.values_list("permissionrule_id", "user_id"):
        users.setdefault(rule_id, set()).add(user_id)
    return {
        rule_id: (frozenset(groups.get(rule_id, ())), frozenset(users.get(rule_id, ())))
        for rule_id in set(groups) | set(users)
    }


def applies(
    limited: tuple[frozenset[int], frozenset[int]] | None,
    user_id: int | None,
    group_ids: frozenset[int],
) -> bool:
    """Does a rule limited to `limited` (None: to nobody in particular) apply to this person?

    `user_id` None (no person, e.g. a probe): only rules for everyone apply.
    """
    if limited is None:
        return True
    if user_id is None:
        return False
    groups, users = limited
    return user_id in users or bool(groups & group_ids)
