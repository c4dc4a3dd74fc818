"""Replay a stored tool call in the rule tester: what would today's rules say about it?

A call comes from the audit: an `audit.tool` event (a tool call made under a skill) or an approval
(a call the rules asked about). It is decided again with its stored tool input and active skill,
so the answer is about exactly that call, not about a re-typed approximation of it.

A stored input may quote hidden text (a Write of a skill's body): for someone without the inspect
permission everything the tester shows of the call goes through its conversation's outbound
filter (`shown`), after the decision has been made on the real input.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.urls import reverse

from skills_app.audit.access import can_view_audit
from skills_app.core.permissions import ToolCall
from skills_app.models import Approval, RunEvent, SkillInvocation
from skills_app.visibility import Outbound, can_inspect


@dataclass(frozen=True, slots=True)
class StoredCall:
    """A tool call as the audit recorded it, with the decision it got at the time."""

    call: ToolCall
    skill: str
    decided_then: str  # allow | ask | deny, or an approval's answer
    reason_then: str
    where: str
    audit_url: str
    conversation_id: int | None = None
    # The conversation's owner: the rules are read for them, as the run read them.
    person: Any = None

    def shown(self, out: Outbound) -> StoredCall:
        """This record as `out`'s viewer may see it (the call's input filtered)."""
        return replace(
            self,
            call=ToolCall(
                tool=self.call.tool, input=out.call_input(self.call.tool, dict(self.call.input))
            ),
            reason_then=out.text(self.reason_then),
        )


def _int(value: str | None, what: str) -> int:
    try:
        return int(value or "")
    except ValueError:
        raise Http404(f"No such {what}.") from None


def stored_call(user: Any, *, event: str | None = None, approval: str | None = None) -> StoredCall:
    """The stored call named by an audit event id or an approval id, for someone who may see it."""
    if not can_view_audit(user):
        raise PermissionDenied(
            "Replaying a call from the audit needs the Auditor role (it shows the call's input)."
        )
    if event is not None:
        return _from_event(user, _int(event, "tool call"))
    return _from_approval(_int(approval, "approval"))


def _from_event(user: Any, pk: int) -> StoredCall:
    row = RunEvent.objects.filter(pk=pk, type="audit.tool").select_related("conversation").first()
    if row is None:
        raise Http404("No such tool call in the audit.")
    if row.hidden and not can_inspect(user):
        raise PermissionDenied("This call holds hidden content; it needs the inspect permission.")
    data = row.data
    invocation = SkillInvocation.objects.filter(pk=data.get("invocation_id")).first()
    tool_input = data.get("input") if isinstance(data.get("input"), dict) else {}
    return StoredCall(
        call=ToolCall(tool=str(data.get("tool") or ""), input=tool_input),
        skill=invocation.skill if invocation else "",
        decided_then=str(data.get("decision") or "none"),
        reason_then=str(data.get("reason") or ""),
        where=(
            f"tool call under the skill {invocation.skill if invocation else '?'} in "
            f"conversation #{row.conversation_id}, {row.created_at:%Y-%m-%d %H:%M:%S}"
        ),
        audit_url=reverse("audit-invocation", args=[invocation.pk]) if invocation else "",
        conversation_id=row.conversation_id,
        person=row.conversation.owner,
    )


def _from_approval(pk: int) -> StoredCall:
    row = (
        Approval.objects.filter(pk=pk).select_related("answered_by", "conversation__owner").first()
    )
    if row is None:
        raise Http404("No such approval.")
    answer = row.get_status_display()
    who = f" by {row.answered_by.get_username()}" if row.answered_by else ""
    return StoredCall(
        call=ToolCall(tool=row.tool, input=row.input if isinstance(row.input, dict) else {}),
        skill=row.skill,
        decided_then=f"ask, then {answer}{who}",
        reason_then=row.reason,
        where=(
            f"approval #{row.pk} in conversation #{row.conversation_id}, "
            f"{row.created_at:%Y-%m-%d %H:%M:%S}"
        ),
        audit_url=reverse("admin:skills_app_approval_change", args=[row.pk]),
        conversation_id=row.conversation_id,
        person=row.conversation.owner,
    )
