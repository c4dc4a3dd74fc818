"""Recording every permission decision with its reason (the `PermissionDecision` rows).

What decided, in the words of the audit: the rule and where it came from (an admin rule, the
skill's reviewed manifest, its `allowed-tools`, a user's "allow for this conversation"), the
default, the user's answer, or a refusal because the call quoted hidden skill text; and who:
the reviewer whose review consented, the person who answered.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from skills_app.core.permissions import Decision, ToolCall, call_as_rule_text
from skills_app.core.review import Consent
from skills_app.models import Approval, PermissionDecision
from skills_app.models.statements import Insert

logger = logging.getLogger(__name__)

# A stored input keeps this much of each string (a Write's content is in the message rows).
INPUT_CHARS = 2_000
SOURCE_OF_RULE = {
    "admin": PermissionDecision.Source.ADMIN,
    "review": PermissionDecision.Source.REVIEW,
    "skill": PermissionDecision.Source.SKILL,
    "conversation": PermissionDecision.Source.CONVERSATION,
}


def _capped(value: Any) -> Any:
    if isinstance(value, str):
        return value if len(value) <= INPUT_CHARS else value[:INPUT_CHARS] + "…"
    if isinstance(value, dict):
        return {str(k): _capped(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_capped(v) for v in value]
    return value


def record_decision(
    *,
    conversation_id: int,
    run_id: int | None,
    call: ToolCall,
    decision: Decision,
    skill: str,
    consents: Mapping[str, Consent],
    refused: bool = False,
    approval: Approval | None = None,
    asked_by: Decision | None = None,
) -> None:
    """Store one decision; never lets a failure to record stop the run (it is logged)."""
    rule = decision.rule
    consent: Consent | None = None
    outcome: str
    source: str
    if refused:
        source = PermissionDecision.Source.HIDDEN
        outcome = PermissionDecision.REFUSED
    elif approval is not None:
        source = PermissionDecision.Source.USER
        outcome = decision.behavior
        rule = asked_by.rule if asked_by is not None else None
    else:
        source = (
            SOURCE_OF_RULE.get(rule.source, PermissionDecision.Source.DEFAULT)
            if rule
            else (PermissionDecision.Source.DEFAULT)
        )
        outcome = decision.behavior
    if rule is not None and rule.source == "review" and rule.scope_skill:
        consent = consents.get(rule.scope_skill)
    elif refused and skill:
        consent = consents.get(skill)
    try:
        _ROW.row(
            conversation_id=conversation_id,
            run_id=run_id,
            tool=call.tool,
            call_text=call_as_rule_text(call)[:10_000],
            input=_capped(dict(call.input)),
            decision=outcome,
            source=source,
            rule_text=(rule.text if rule is not None else "")[:1000],
            rule_id=rule.rule_id if rule is not None and rule.source == "admin" else None,
            reason=decision.reason,
            skill=skill,
            review_id=consent.review_id if consent is not None else None,
            reviewer_id=consent.reviewer_id if consent is not None else None,
            reviewer_name=_reviewer_name(consent),
            approval=approval,
            approver_id=approval.answered_by_id if approval is not None else None,
        )
    except Exception:  # the audit row matters, but never more than the run itself
        logger.exception("could not record the permission decision on %s", call.tool)


# A run's gate writes one row at every tool call: inserted without compiling the query again.
_ROW = Insert(PermissionDecision)


def _reviewer_name(consent: Consent | None) -> str:
    if consent is None:
        return ""
    label = consent.label
    return label.rsplit(" by ", 1)[1] if " by " in label else label


__all__ = ["INPUT_CHARS", "record_decision"]
