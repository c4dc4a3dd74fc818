"""The audit's invocation pages (audit viewers: the Auditor and Administrator roles): every skill
invocation, filtered, and one invocation with what it injected and the tool calls made under it."""

from __future__ import annotations

import json
from datetime import datetime, time
from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from skills_app.audit.access import can_replay, require_audit_viewer
from skills_app.audit.feedback import feedback_counts
from skills_app.core.permissions import ToolCall, call_as_rule_text
from skills_app.core.transcript import result_text
from skills_app.models import Approval, RunEvent, SkillInvocation
from skills_app.visibility import INSPECT_PERMISSION, Outbound, outbound

PAGE_SIZE = 50
HIDDEN_PLACEHOLDER = "(hidden: you lack the inspect permission)"
RESULT_EXCERPT = 600


def _get_invocation_for_user(request: HttpRequest, pk: int) -> SkillInvocation:
    require_audit_viewer(request)
    try:
        return SkillInvocation.objects.select_related(
            "conversation__owner",
            "conversation__deleted_by",
            "run",
            "version__package",
            "approval__answered_by",
        ).get(pk=pk)
    except SkillInvocation.DoesNotExist:
        raise Http404("No such invocation.") from None


class InvocationFilterForm(forms.Form):
    skill = forms.CharField(required=False, max_length=200)
    user = forms.CharField(required=False, max_length=150, label="User")
    caller = forms.ChoiceField(
        required=False, choices=[("", "any"), *SkillInvocation.Caller.choices]
    )
    decision = forms.ChoiceField(
        required=False,
        choices=[("", "any"), ("allowed", "allowed"), ("denied", "denied"), ("failed", "failed")],
    )
    since = forms.DateField(required=False, label="From", widget=forms.DateInput({"type": "date"}))
    until = forms.DateField(required=False, label="To", widget=forms.DateInput({"type": "date"}))

    def filter(self, rows: QuerySet[SkillInvocation]) -> QuerySet[SkillInvocation]:
        data = self.cleaned_data
        if data.get("skill"):
            rows = rows.filter(skill=data["skill"].strip())
        if data.get("user"):
            rows = rows.filter(conversation__owner__username=data["user"].strip())
        if data.get("caller"):
            rows = rows.filter(caller=data["caller"])
        if data.get("decision"):
            rows = rows.filter(decision=data["decision"])
        zone = timezone.get_current_timezone()
        if data.get("since"):
            rows = rows.filter(created_at__gte=datetime.combine(data["since"], time.min, zone))
        if data.get("until"):
            rows = rows.filter(created_at__lte=datetime.combine(data["until"], time.max, zone))
        return rows


def decided_by(inv: SkillInvocation) -> str:
    """What decided an invocation, in words: the approval, the rule, or the error code."""
    if inv.approval_id and inv.approval is not None:
        approval = inv.approval
        who = approval.answered_by.get_username() if approval.answered_by else "nobody"
        return f"approval #{approval.pk}: {approval.get_status_display()} by {who}"
    if inv.error_code and inv.decision != "denied":
        return f"error: {inv.error_code}"
    return inv.decided_by or inv.error_code or ""


@login_required
@require_GET
def invocation_list(request: HttpRequest) -> HttpResponse:
    """Every skill invocation, newest first, filtered and paginated (audit viewers only)."""
    require_audit_viewer(request)
    form = InvocationFilterForm(request.GET or None)
    rows = SkillInvocation.objects.select_related(
        "conversation__owner", "conversation__deleted_by", "approval__answered_by"
    ).order_by("-created_at", "-pk")
    if form.is_bound and form.is_valid():
        rows = form.filter(rows)
    page = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    can_inspect = request.user.has_perm(INSPECT_PERMISSION)
    filters: dict[int, Outbound] = {}
    for inv in page.object_list:
        if not can_inspect:
            out = filters.setdefault(
                inv.conversation_id,
                outbound(inv.conversation_id, can_inspect=False, viewer_id=request.user.pk),
            )
            filter_invocation(inv, out)
    return render(
        request,
        "skills_app/audit/invocations.html",
        {
            "form": form,
            "page": page,
            "rows": [(inv, decided_by(inv)) for inv in page.object_list],
            "query": query.urlencode(),
            "can_inspect": can_inspect,
        },
    )


def filter_invocation(inv: SkillInvocation, out: Outbound) -> None:
    """Pass the texts of an invocation (and its approval) a page shows through `out`.

    Only the in-memory row changes (for display; these views never save). The hidden fields
    themselves (injected text, commands and output) are withheld by the templates.
    """
    inv.args = out.text(inv.args)
    inv.error = out.text(inv.error)
    # The rules a skill applied are its allowed-tools as SKILL.md writes them.
    inv.allowed_tools = out.value(list(inv.allowed_tools or []))
    inv.disallowed_tools = out.value(list(inv.disallowed_tools or []))
    inv.status_text = out.text(inv.status_text)
    if inv.approval_id and inv.approval is not None:
        inv.approval.call_text = out.text(inv.approval.call_text)
        inv.approval.reason = out.text(inv.approval.reason)


@login_required
@require_GET
def invocation_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One invocation: what it injected, what it applied, and the tool calls made under it."""
    inv = _get_invocation_for_user(request, pk)
    can_inspect = request.user.has_perm(INSPECT_PERMISSION)
    out = outbound(inv.conversation_id, can_inspect=can_inspect, viewer_id=request.user.pk)
    filter_invocation(inv, out)
    return render(
        request,
        "skills_app/audit/invocation.html",
        {
            "inv": inv,
            "decided_by": decided_by(inv),
            "can_inspect": can_inspect,
            "injected_text": inv.injected_text if can_inspect else HIDDEN_PLACEHOLDER,
            "tool_calls": tool_calls_for(inv, out=out),
            # How the answers written with this version were rated (notes on their own page).
            "feedback": feedback_counts(inv.skill, inv.digest),
            "can_replay": can_replay(request.user),
            "version_url": _admin_url("skills_app_skillversion_change", inv.version_id),
            "shell_commands": inv.shell_commands if can_inspect else [],
        },
    )


def tool_calls_for(inv: SkillInvocation, *, out: Outbound | None = None) -> list[dict[str, Any]]:
    """The `audit.tool` records of an invocation, with the approval that answered each call.

    `out` filters the inputs and results for a viewer without the inspect permission.
    """
    out = out or outbound(inv.conversation_id, can_inspect=True)
    events = list(
        RunEvent.objects.filter(
            conversation_id=inv.conversation_id, type="audit.tool", data__invocation_id=inv.pk
        ).order_by("seq")
    )
    # Audit events come from a run; without one (or without events) there are no calls.
    run_id = inv.run_id
    if not events or run_id is None:
        return []
    approvals = list(
        Approval.objects.filter(run_id=run_id)
        .exclude(tool="Skill")
        .select_related("answered_by")
        .order_by("created_at", "pk")
    )
    results = {
        e.data.get("tool_use_id"): e.data
        for e in RunEvent.objects.filter(run_id=run_id, type="tool.result").only("data")
    }
    used: set[int] = set()
    calls: list[dict[str, Any]] = []
    for event in events:
        data = event.data
        tool_input = data.get("input") or {}
        call_text = call_as_rule_text(ToolCall(tool=str(data.get("tool")), input=tool_input))
        approval = next(
            (
                a
                for a in approvals
                if a.pk not in used
                and (
                    (a.tool_use_id and a.tool_use_id == data.get("tool_use_id"))
                    or (not a.tool_use_id and a.call_text == call_text)
                )
            ),
            None,
        )
        if approval is not None:
            used.add(approval.pk)
        result = results.get(data.get("tool_use_id")) or {}
        # Filtered whole, then cut: a cut first could leave the start of a hidden span.
        content = out.text(result_text(result))
        calls.append(
            {
                "seq": event.seq,
                "event_id": event.pk,
                "tool": data.get("tool"),
                "call": out.text(call_text),
                "input": json.dumps(
                    out.call_input(str(data.get("tool") or ""), tool_input),
                    indent=2,
                    ensure_ascii=False,
                ),
                "decision": data.get("decision") or "none",
                "reason": out.text(str(data.get("reason") or "")),
                "is_error": bool(data.get("is_error")),
                "approval": approval,
                "result": content[:RESULT_EXCERPT] + ("…" if len(content) > RESULT_EXCERPT else ""),
                "at": event.created_at,
            }
        )
    return calls


def _admin_url(name: str, pk: int | None) -> str:
    if pk is None:
        return ""
    try:
        return reverse(f"admin:{name}", args=[pk])
    except NoReverseMatch:
        return ""
