"""Every change to a permission rule, from the admin or the Rules page, as an audit row with who
acted and the rule before and after (`trail.record`)."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from skills_app import trail
from skills_app.models import AuditEvent, PermissionRule
from skills_app.permissions.forms import PermissionRuleForm

RuleState = dict[str, Any]


def stored_state(rule_id: int | None) -> RuleState | None:
    """The rule as stored now, in plain values (names, not ids); None for no such rule."""
    rule = PermissionRule.objects.filter(pk=rule_id).first() if rule_id else None
    if rule is None:
        return None
    return {
        "behavior": rule.behavior,
        "rule_text": rule.rule_text,
        "skill": rule.skill,
        "enabled": rule.enabled,
        "position": rule.position,
        "note": rule.note,
        "applies_to_groups": sorted(rule.applies_to_groups.values_list("name", flat=True)),
        "applies_to_users": sorted(rule.applies_to_users.values_list("username", flat=True)),
    }


def _target(rule_id: int, state: RuleState) -> str:
    return f"rule #{rule_id}: {state['behavior']} {state['rule_text']}"


def record_saved(rule_id: int, before: RuleState | None, actor: Any) -> None:
    """Record a rule added (`before` None) or changed; a save that changed nothing is not a change."""
    after = stored_state(rule_id)
    if after is None:
        return
    if before is None:
        trail.record(
            AuditEvent.RULE_ADDED, actor=actor, target=_target(rule_id, after), after=after
        )
        return
    changed = [key for key in after if before.get(key) != after[key]]
    if changed:
        trail.record(
            AuditEvent.RULE_CHANGED,
            actor=actor,
            target=_target(rule_id, after),
            changed=changed,
            before=before,
            after=after,
        )


def record_deleted(rule_id: int, before: RuleState, actor: Any) -> None:
    trail.record(
        AuditEvent.RULE_DELETED, actor=actor, target=_target(rule_id, before), before=before
    )


def save(form: PermissionRuleForm, actor: Any) -> PermissionRule:
    """Save a valid rule form as `actor` (its author now) and record the change."""
    with transaction.atomic():
        before = stored_state(form.instance.pk)
        rule = form.save(commit=False)
        rule.author = actor
        rule.save()
        form.save_m2m()
        record_saved(rule.pk, before, actor)
    return rule


def delete(rule: PermissionRule, actor: Any) -> None:
    """Delete a rule as `actor` and record what it was."""
    with transaction.atomic():
        rule_id = rule.pk
        before = stored_state(rule_id)
        rule.delete()
        if before is not None:
            record_deleted(rule_id, before, actor)
