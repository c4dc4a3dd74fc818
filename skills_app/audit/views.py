"""The audit pages: skill invocations (audit viewers: the Auditor and Administrator roles), a
conversation with what the model saw (inspectors), and JSONL export (owner or inspector) and import
(any signed-in user). Conversations their owner deleted stay here, marked as deleted."""

from __future__ import annotations

import json
from datetime import datetime, time
from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods

from skills_app.audit import requests as audit
from skills_app.audit import trail
from skills_app.audit.access import can_replay, can_view_audit, require_audit_viewer
from skills_app.audit.transcript_io import (
    MAX_IMPORT_BYTES,
    TranscriptImportError,
    export_lines,
    import_transcript,
)
from skills_app.chat import conversations as conv
from skills_app.chat import rendering
from skills_app.chat.usage import call_usage, conversation_usage, run_cost
from skills_app.core.permissions import ToolCall, call_as_rule_text
from skills_app.http import AuthedHttpRequest
from skills_app.models import (
    Approval,
    AuditEvent,
    Conversation,
    Run,
    RunEvent,
    SkillInvocation,
)
from skills_app.runs import store
from skills_app.visibility import INSPECT_PERMISSION, Outbound, outbound

PAGE_SIZE = 50
HIDDEN_PLACEHOLDER = "(hidden: you lack the inspect permission)"
RESULT_EXCERPT = 600


def _require_inspector(request: HttpRequest) -> None:
    if not request.user.has_perm(INSPECT_PERMISSION):
        raise PermissionDenied("This page needs the permission to inspect injected content.")


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


def _get_conversation_for_user(
    request: HttpRequest, pk: int, *, owner_may: bool = False
) -> Conversation:
    """The conversation for an inspector (or its owner when `owner_may`); 404 for anyone else."""
    try:
        conversation = Conversation.objects.select_related("owner", "deleted_by").get(pk=pk)
    except Conversation.DoesNotExist:
        raise Http404("No such conversation.") from None
    if request.user.has_perm(INSPECT_PERMISSION):
        return conversation
    if owner_may and conversation.owner_id == request.user.pk and conversation.deleted_at is None:
        return conversation
    raise Http404("No such conversation.")


# -- invocations --------------------------------------------------------------------------------


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
                inv.conversation_id, outbound(inv.conversation_id, can_inspect=False)
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
    out = outbound(inv.conversation_id, can_inspect=can_inspect)
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
        content = out.text(str(result.get("content", "")))
        calls.append(
            {
                "seq": event.seq,
                "event_id": event.pk,
                "tool": data.get("tool"),
                "call": out.text(call_text),
                "input": json.dumps(out.value(tool_input), indent=2, ensure_ascii=False),
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


# -- a conversation -----------------------------------------------------------------------------


def conversations_matching(query: str) -> QuerySet[Conversation]:
    """Conversations for the inspector's index: by title, owner or id."""
    rows = Conversation.objects.select_related("owner", "deleted_by").order_by("-updated_at", "-pk")
    if query:
        match = Q(title__icontains=query) | Q(owner__username__iexact=query)
        if query.isdigit():
            match |= Q(pk=int(query))
        rows = rows.filter(match)
    return rows


@login_required
@require_GET
def conversation_list(request: HttpRequest) -> HttpResponse:
    """Every user's conversations, to open one's audit (inspectors only)."""
    _require_inspector(request)
    query = request.GET.get("q", "").strip()[:200]
    page = Paginator(conversations_matching(query), PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "skills_app/audit/conversations.html", {"page": page, "q": query})


@login_required
@require_GET
def conversation_audit(request: HttpRequest, pk: int) -> HttpResponse:
    """The full transcript with hidden rows marked, and every model request rebuilt."""
    _require_inspector(request)
    conversation = _get_conversation_for_user(request, pk)
    rows = conv.visible_messages(conversation, can_inspect=True)
    ctx = conv.transcript_context(conversation, rows, can_inspect=True)
    messages_html = [rendering.render_message(row, can_inspect=True, ctx=ctx) for row in rows]
    runs = list(conversation.runs.order_by("started_at", "pk"))
    rebuilt = audit.requests_for_conversation(conversation, runs=runs)
    seq_of = dict(conversation.messages.values_list("pk", "seq"))
    run_views = []
    previous: list[dict[str, Any]] = []
    for run in runs:
        request_views = []
        for view in rebuilt.get(run.pk, []):
            shared = audit.common_prefix(previous, view.messages)
            request_views.append(_request_context(view, shared, seq_of))
            previous = view.messages
        run_views.append({"run": run, "requests": request_views, "cost": run_cost(run.pk)})
    invocations = list(
        conversation.invocations.select_related("approval__answered_by").order_by("created_at")
    )
    return render(
        request,
        "skills_app/audit/conversation.html",
        {
            "conversation": conversation,
            "messages_html": messages_html,
            "runs": run_views,
            "other_requests": [
                _request_context(view, 0, seq_of) for view in audit.other_requests(conversation)
            ],
            "cost": conversation_usage(conversation.pk),
            "invocations": [(inv, decided_by(inv)) for inv in invocations],
            "saving": audit.layer_saving(store.skills_for_conversation(conversation)),
            "size_labels": audit.SIZE_PARTS,
            "can_audit": can_view_audit(request.user),
        },
    )


def _request_context(
    view: audit.RequestView, shared: int, seq_of: dict[int, int]
) -> dict[str, Any]:
    sizes = audit.size_breakdown(view)
    seqs = [seq_of[m] for m in view.message_ids if m in seq_of]
    return {
        "view": view,
        "sizes": [(label, sizes[key]) for key, label in audit.SIZE_PARTS],
        "total": sizes["total"],
        "rows": f"{seqs[0]}–{seqs[-1]}" if seqs else "none",
        "shared": shared,
        "new_messages": [
            {
                "number": shared + i + 1,
                "role": m["role"],
                "json": json.dumps(m["content"], indent=2, ensure_ascii=False),
            }
            for i, m in enumerate(view.messages[shared:])
        ],
        "tools": [
            {"name": t.get("name"), "description": t.get("description", "")}
            for t in view.tools
            if t.get("name") != "Skill"
        ],
        "catalog": view.catalog,
        "usage": call_usage(view.model_call),
    }


@login_required
@require_GET
def request_json(request: HttpRequest, pk: int, run_id: int, call: int) -> JsonResponse:
    """One request as the JSON body of the Messages API call: captured, or rebuilt for old runs."""
    _require_inspector(request)
    conversation = _get_conversation_for_user(request, pk)
    try:
        run = conversation.runs.get(pk=run_id)
    except Run.DoesNotExist:
        raise Http404("No such run in this conversation.") from None
    view = next((v for v in audit.requests_for_run(run) if v.call == call), None)
    if view is None:
        raise Http404("No such model call in this run.")
    return JsonResponse(view.body, json_dumps_params={"indent": 2, "ensure_ascii": False})


# -- export and import --------------------------------------------------------------------------


@login_required
@require_GET
def conversation_export(request: HttpRequest, pk: int) -> HttpResponse:
    """The conversation as JSONL; hidden rows only for inspectors."""
    conversation = _get_conversation_for_user(request, pk, owner_may=True)
    include_hidden = request.user.has_perm(INSPECT_PERMISSION)
    if conversation.owner_id != request.user.pk:
        # Someone else's conversation leaves the server: the audit trail says who took it.
        trail.record(
            AuditEvent.EXPORT,
            actor=request.user,
            target=f"conversation #{conversation.pk} (JSONL)",
            conversation_id=conversation.pk,
            hidden_rows=include_hidden,
        )
    body = "".join(export_lines(conversation, include_hidden=include_hidden))
    response = HttpResponse(body, content_type="application/jsonl; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="conversation-{conversation.pk}.jsonl"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


class ImportForm(forms.Form):
    file = forms.FileField(label="Transcript (.jsonl)")
    title = forms.CharField(required=False, max_length=200, label="Title (optional)")


@login_required
@require_http_methods(["GET", "POST"])
def transcript_import(request: AuthedHttpRequest) -> HttpResponse:
    """Upload a JSONL transcript; it becomes a new conversation of the uploader."""
    form = ImportForm(request.POST or None, request.FILES or None)
    error = ""
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        if upload.size > MAX_IMPORT_BYTES:
            error = f"The file is larger than {MAX_IMPORT_BYTES // (1024 * 1024)} MB."
        else:
            try:
                result = import_transcript(
                    request.user.pk, upload.read(), title=form.cleaned_data["title"]
                )
            except TranscriptImportError as exc:
                error = f"Nothing was imported. {exc}"
            else:
                return redirect("conversation", pk=result.conversation.pk)
    status = 400 if request.method == "POST" else 200  # a successful POST redirected above
    return render(
        request,
        "skills_app/audit/import.html",
        {"form": form, "error": error, "max_mb": MAX_IMPORT_BYTES // (1024 * 1024)},
        status=status,
    )
