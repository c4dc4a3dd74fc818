"""The audit's conversation pages: a conversation with what the model saw (inspectors), and JSONL
export (owner or inspector) and import (any signed-in user). Conversations their owner deleted stay
here, marked as deleted. The invocation pages are in `invocations.py`."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from skills_app import trail
from skills_app.audit import requests as audit
from skills_app.audit.access import can_view_audit
from skills_app.audit.invocations import PAGE_SIZE, decided_by
from skills_app.audit.markdown_export import export_markdown_text
from skills_app.audit.transcript_io import (
    MAX_IMPORT_BYTES,
    TranscriptImportError,
    export_lines,
    import_transcript,
)
from skills_app.chat import conversations as conv
from skills_app.chat import rendering, turns
from skills_app.chat.usage import call_usage, conversation_usage, run_cost
from skills_app.http import AuthedHttpRequest
from skills_app.models import (
    AuditEvent,
    Conversation,
    Run,
)
from skills_app.runs import agent_setup
from skills_app.visibility import INSPECT_PERMISSION


def _require_inspector(request: HttpRequest) -> None:
    if not request.user.has_perm(INSPECT_PERMISSION):
        raise PermissionDenied("This page needs the permission to inspect injected content.")


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
    ctx[turns.AS_STORED] = True  # every row as stored, a regenerated answer's versions all shown
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
            "saving": audit.layer_saving(agent_setup.skills_for_conversation(conversation)),
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


def _exported(request: HttpRequest, pk: int, form: str) -> tuple[Conversation, bool]:
    """The conversation to export and whether hidden rows go with it (inspectors only).

    Someone else's conversation leaving the server is recorded: the audit trail says who took it.
    """
    conversation = _get_conversation_for_user(request, pk, owner_may=True)
    include_hidden = request.user.has_perm(INSPECT_PERMISSION)
    if conversation.owner_id != request.user.pk:
        trail.record(
            AuditEvent.EXPORT,
            actor=request.user,
            target=f"conversation #{conversation.pk} ({form})",
            conversation_id=conversation.pk,
            hidden_rows=include_hidden,
        )
    return conversation, include_hidden


@login_required
@require_GET
def conversation_export(request: HttpRequest, pk: int) -> HttpResponse:
    """The conversation as JSONL; hidden rows only for inspectors."""
    conversation, include_hidden = _exported(request, pk, "JSONL")
    body = "".join(export_lines(conversation, include_hidden=include_hidden))
    response = HttpResponse(body, content_type="application/jsonl; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="conversation-{conversation.pk}.jsonl"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


@login_required
@require_GET
def conversation_export_markdown(request: HttpRequest, pk: int) -> HttpResponse:
    """The conversation as Markdown, as its reader sees it; inspectors get hidden rows marked."""
    conversation, include_hidden = _exported(request, pk, "Markdown")
    body = export_markdown_text(conversation, include_hidden=include_hidden)
    response = HttpResponse(body, content_type="text/markdown; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="conversation-{conversation.pk}.md"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


# The last few import reports, per browser session: the result page lists skipped lines.
IMPORT_REPORTS = "transcript_import_reports"
KEPT_REPORTS = 5


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
                reports = request.session.get(IMPORT_REPORTS, {})
                reports = dict(list(reports.items())[-(KEPT_REPORTS - 1) :])
                reports[str(result.conversation.pk)] = result.report()
                request.session[IMPORT_REPORTS] = reports
                return redirect("transcript-import-result", pk=result.conversation.pk)
    status = 400 if request.method == "POST" else 200  # a successful POST redirected above
    return render(
        request,
        "skills_app/audit/import.html",
        {"form": form, "error": error, "max_mb": MAX_IMPORT_BYTES // (1024 * 1024)},
        status=status,
    )


@login_required
@require_GET
def transcript_import_result(request: AuthedHttpRequest, pk: int) -> HttpResponse:
    """What an import did: messages stored, lines merged or skipped (with line numbers and why)."""
    conversation = Conversation.objects.filter(
        pk=pk, owner_id=request.user.pk, deleted_at__isnull=True
    ).first()
    if conversation is None:
        raise Http404("No such conversation.")
    report = request.session.get(IMPORT_REPORTS, {}).get(str(pk))
    return render(
        request, "skills_app/audit/import_result.html", {"report": report, "pk": conversation.pk}
    )
