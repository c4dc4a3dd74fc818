"""Conversation pages: the list with search, new/rename/delete, the chat page and artifact downloads."""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import (
    FileResponse,
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
)
from django.http.response import HttpResponseBase
from django.middleware.csrf import get_token
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from skills_app import textlog
from skills_app.chat import actions, approval_page, fragments, preferences
from skills_app.chat import conversations as conv
from skills_app.chat.approval_words import relative, workspace_roots
from skills_app.chat.controls import with_csrf
from skills_app.chat.downloads import filtered_download
from skills_app.chat.forms import RenameForm, SearchForm
from skills_app.chat.model_views import picker_context
from skills_app.chat.sidebar import sidebar_context
from skills_app.chat.usage import conversation_usage
from skills_app.core.profiles import DEFAULT_PROFILE, PROFILES, profile_choices
from skills_app.core.tools.workspace import WorkspaceFileError, open_workspace_file
from skills_app.http import AuthedHttpRequest
from skills_app.mcp.prompts import menu_prompts
from skills_app.models import Conversation, Run
from skills_app.permissions.approvals import pending_approvals
from skills_app.permissions.blocked import offered
from skills_app.policy.access import policy_for, user_groups
from skills_app.registry.skills import skills_for_user
from skills_app.runs import pending
from skills_app.runs import supervisor as runs
from skills_app.visibility import INSPECT_PERMISSION, outbound
from skills_app.workspaces import workspace_for

logger = logging.getLogger(__name__)


def _get_conversation_for_user(request: HttpRequest, pk: int) -> Conversation:
    """The conversation if the requesting user owns it and has not deleted it; 404 otherwise."""
    try:
        return Conversation.objects.owned_by(request.user).get(pk=pk)
    except Conversation.DoesNotExist:
        raise Http404("No such conversation.") from None


@login_required
@require_GET
def home(request: AuthedHttpRequest) -> HttpResponse:
    """The conversation list, newest activity first, with search over titles and visible text."""
    form = SearchForm(request.GET)
    query = form.cleaned_data["q"] if form.is_valid() else ""
    context = {
        "conversations": conv.search_conversations(
            request.user.pk, query, can_inspect=request.user.has_perm(INSPECT_PERMISSION)
        ),
        "q": query,
        "profiles": profile_choices(),
    }
    if request.htmx and request.htmx.target == "conversation-list":
        return render(request, "skills_app/chat/_conversation_list.html", context)
    return render(request, "skills_app/chat/home.html", context)


@login_required
@require_POST
def conversation_new(request: AuthedHttpRequest) -> HttpResponse:
    """Open an empty conversation (the person's unused one if they have it) and go there.

    The delivery profile is a developer's setting: only staff choose it; everyone else gets the
    default.
    """
    profile = (request.POST.get("profile") if request.user.is_staff else None) or DEFAULT_PROFILE
    if profile not in PROFILES:
        # Plain text: the refused value is echoed back, never as markup.
        return HttpResponse(
            "Unknown delivery profile; choose one of: " + ", ".join(PROFILES),
            status=400,
            content_type="text/plain; charset=utf-8",
        )
    conversation = conv.empty_or_new(request.user, profile, model=_default_model(request.user.pk))
    return _redirect(request, reverse("conversation", args=[conversation.pk]))


@login_required
@require_GET
def conversation_start(request: AuthedHttpRequest) -> HttpResponse:
    """Where signing in lands: a conversation ready for a message (never a second empty one)."""
    conversation = conv.empty_or_new(request.user, None, model=_default_model(request.user.pk))
    return redirect("conversation", pk=conversation.pk)


def _default_model(user_id: int) -> str:
    """The configured default model when the person may use it ("" means it), else the first
    one they may."""
    policy = policy_for(user_id)
    return "" if policy.offers(settings.ANTHROPIC_MODEL) else policy.default_model()


@login_required
@require_POST
def conversation_rename(request: AuthedHttpRequest, pk: int) -> HttpResponse:
    """Rename; htmx gets the updated list row, a plain form post goes back to the list."""
    conversation = _get_conversation_for_user(request, pk)
    form = RenameForm(request.POST)
    if not form.is_valid():
        return HttpResponse(
            "A title is required (at most 200 characters).",
            status=400,
            content_type="text/plain; charset=utf-8",
        )
    conv.rename_conversation(conversation, form.cleaned_data["title"])
    if request.htmx:
        return render(request, "skills_app/chat/_conversation_row.html", {"c": conversation})
    if request.POST.get("next") == "chat":
        return redirect("conversation", pk=conversation.pk)
    return redirect("skills-home")


@login_required
@require_POST
def conversation_pin(request: AuthedHttpRequest, pk: int) -> HttpResponse:
    """Pin (pinned=1) or unpin (pinned=0) a conversation; back to the chat or the list."""
    conversation = _get_conversation_for_user(request, pk)
    pinned = request.POST.get("pinned", "")
    if pinned not in ("0", "1"):
        return HttpResponse(
            "Say pinned=1 to pin the conversation or pinned=0 to unpin it.",
            status=400,
            content_type="text/plain; charset=utf-8",
        )
    conv.pin_conversation(conversation, pinned == "1")
    if request.POST.get("next") == "list":
        return redirect("skills-home")
    return redirect("conversation", pk=conversation.pk)


@login_required
@require_http_methods(["GET", "POST"])
async def conversation_delete(request: AuthedHttpRequest, pk: int) -> HttpResponse:
    """GET asks for confirmation; POST hides the conversation from its owner, for good.

    Every row stays for the audit; a run still going is stopped (its partial answer is kept, as
    for any stopped run) so nothing is added to a conversation nobody can see any more.
    """
    conversation = await sync_to_async(_get_conversation_for_user)(request, pk)
    if request.method == "GET":
        return await sync_to_async(render)(
            request, "skills_app/chat/confirm_delete.html", {"conversation": conversation}
        )
    user = await request.auser()
    active = await sync_to_async(conv.delete_conversation)(conversation, user)
    for run_id in active:
        if not await runs.stop_run(run_id):
            logger.warning("run %s of deleted conversation %s could not be stopped", run_id, pk)
    return _redirect(request, reverse("skills-home"))


@login_required
@require_GET
def conversation_detail(request: AuthedHttpRequest, pk: int) -> HttpResponse:
    """The chat page: the stored transcript rendered with the fragments the websocket pushes."""
    conversation = _get_conversation_for_user(request, pk)
    can_inspect = request.user.has_perm(INSPECT_PERMISSION)
    # Read the event position first: anything stored after it is replayed by the socket, and
    # the client replaces elements by id, so a row rendered here and replayed is not duplicated.
    last_seq = Conversation.objects.values_list("last_event_seq", flat=True).get(pk=pk)
    # The newest rows only; earlier ones load on demand (`conversation_earlier`). The socket
    # resumes from the event position, whatever rows the page holds.
    page = conv.transcript_page(conversation, can_inspect=can_inspect)
    messages_html = _page_html(conversation, page, can_inspect=can_inspect)
    run = conv.active_run(pk)
    pending_now = pending_approvals(pk)
    approvals_html = fragments.approvals_page_html(pk, pending_now, can_inspect=can_inspect)
    skills = [
        {
            "name": s.name,
            "description": s.description,
            "hint": s.argument_hint or "",
            # The skill's page: what it is for, who reviewed it, what it may run.
            "url": reverse("skill-detail", args=[s.name]),
        }
        # Skills a deny rule blocks are not offered in the "/" menu.
        for s in offered(skills_for_user(request.user.pk), request.user.pk).skills()
        if s.user_invocable
    ] + _prompt_options(request.user.pk)
    # The fragments' forms work as plain POSTs too (a page without JavaScript): with a token.
    token = get_token(request)
    return render(
        request,
        "skills_app/chat/chat.html",
        {
            "conversation": conversation,
            "messages_html": [with_csrf(html, token) for html in messages_html],
            "page": page,
            "approvals_html": [with_csrf(html, token) for html in approvals_html],
            # The answer waits for the person: the composer says so and links the question.
            "waiting_for": pending_now[0] if pending_now else None,
            "live": _live_bubbles(textlog.open_streams(pk, upto_seq=last_seq)),
            "last_seq": last_seq,
            "running": run is not None,
            "queued_run": run.pk if run is not None and run.status == Run.QUEUED else None,
            "skills": skills,
            "can_inspect": can_inspect,
            "picker": picker_context(conversation),
            "cost": conversation_usage(conversation.pk),
            "queued_html": fragments.queued_page_html(pending.pending(pk)),
            "sidebar": sidebar_context(request.user.pk, current=pk, can_inspect=can_inspect),
            # The first screen's introduction to skills, until the person closes it.
            "show_intro": not messages_html and not preferences.intro_dismissed(request.user.pk),
        },
    )


def _prompt_options(user_id: int) -> list[dict[str, str]]:
    """The prompts of the MCP servers this person sees, as "/" menu options (`mcp.prompts`)."""
    found = async_to_sync(menu_prompts)(user_id, user_groups(user_id))
    return [
        {
            "name": p.command,
            "description": p.definition.description
            or f'The prompt "{p.definition.name}" of the MCP server "{p.server}".',
            "hint": p.definition.hint(),
            "url": "",
        }
        for p in found
    ]


def _page_html(
    conversation: Conversation, page: conv.TranscriptPage, *, can_inspect: bool
) -> list[str]:
    """A page's rows as the chat shows them, answered approvals in place."""
    ctx = conv.transcript_context(conversation, page.rows, can_inspect=can_inspect)
    # Answered approvals stay where they were asked, as a compact line.
    return approval_page.transcript_html(
        conversation.pk,
        page.rows,
        ctx,
        can_inspect=can_inspect,
        after=page.after,
        until=page.until,
    )


@login_required
@require_GET
def conversation_earlier(request: AuthedHttpRequest, pk: int) -> HttpResponse:
    """The page of rows before seq `?before=`: a fragment in place of "Load earlier messages"
    (htmx), or a page of its own without JavaScript. Hidden rows only for inspectors."""
    conversation = _get_conversation_for_user(request, pk)
    raw = request.GET.get("before", "")
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:
        return HttpResponseBadRequest(
            "Say which messages to load: before=<the number of the oldest message shown>, "
            "a whole number, as the page's Load earlier messages link gives it.",
            content_type="text/plain; charset=utf-8",
        )
    can_inspect = request.user.has_perm(INSPECT_PERMISSION)
    page = conv.transcript_page(conversation, can_inspect=can_inspect, before=int(raw))
    token = get_token(request)
    context = {
        "conversation": conversation,
        "page": page,
        "messages_html": [
            with_csrf(html, token)
            for html in _page_html(conversation, page, can_inspect=can_inspect)
        ],
    }
    if request.htmx:
        return render(request, "skills_app/chat/_earlier_page.html", context)
    return render(request, "skills_app/chat/earlier.html", context)


@login_required
@require_GET
def conversation_sidebar(request: AuthedHttpRequest) -> HttpResponse:
    """The sidebar's list for a search (htmx), grouped by day like the full sidebar."""
    form = SearchForm(request.GET)
    query = form.cleaned_data["q"] if form.is_valid() else ""
    current = request.GET.get("current", "")
    context = sidebar_context(
        request.user.pk,
        query=query,
        current=int(current) if current.isascii() and current.isdigit() else None,
        can_inspect=request.user.has_perm(INSPECT_PERMISSION),
    )
    return render(
        request,
        "skills_app/chat/_sidebar_list.html",
        {
            "groups": context["groups"],
            "current_id": context["current_id"],
            "q": query,
            "truncated": context["truncated"],
        },
    )


def _live_bubbles(blocks: list[textlog.StreamedBlock]) -> list[dict[str, Any]]:
    """Streamed blocks grouped into the answers being written (one per run and model call)."""
    bubbles: dict[tuple[int, int], dict[str, Any]] = {}
    for block in blocks:
        key = (block.run_id, block.call)
        bubble = bubbles.setdefault(key, {"run_id": block.run_id, "call": block.call, "blocks": []})
        bubble["blocks"].append(block)
    return list(bubbles.values())


@login_required
@require_POST
async def conversation_action(request: HttpRequest, pk: int) -> HttpResponse:
    """Send, retry, stop or answer an approval from a plain form post (a page without JavaScript).

    The same fields the page's forms send over the websocket; the same checks (`chat.actions`).
    """
    user = await request.auser()
    if user.pk is None or not await Conversation.objects.owned_by(user).filter(pk=pk).aexists():
        raise Http404("No such conversation.")
    try:
        info = await actions.perform(
            request.POST.get("action", ""), request.POST, conversation_id=pk, user_id=user.pk
        )
    except actions.ActionError as exc:
        await sync_to_async(messages.error)(request, str(exc))
    else:
        if info:
            await sync_to_async(messages.info)(request, info)
    return redirect("conversation", pk=pk)


@login_required
@require_GET
def conversation_file(request: HttpRequest, pk: int, path: str) -> HttpResponseBase:
    """Download an artifact from the conversation's workspace; only regular files under out/."""
    _get_conversation_for_user(request, pk)
    parts = path.split("/")
    if len(parts) < 2 or parts[0] != "out":
        raise Http404("Only files under out/ can be downloaded.")
    # Opened without following any link (a command may have replaced out/ or a file with one).
    try:
        handle = open_workspace_file(workspace_for(pk), path)
    except WorkspaceFileError as exc:
        if exc.reason == "invalid":
            return HttpResponseBadRequest(
                "That is not a file path under out/.", content_type="text/plain; charset=utf-8"
            )
        raise Http404("No such file.") from exc
    if not request.user.has_perm(INSPECT_PERMISSION):
        # A command can copy a staged skill file to out/: downloads pass the filter too.
        filtered = filtered_download(pk, handle, parts[-1])
        if filtered is not None:
            return filtered
    return FileResponse(handle, as_attachment=True, filename=parts[-1])


TOOL_TEXT_PARTS = ("input", "result", "files")


@login_required
@require_GET
def tool_text(request: HttpRequest, pk: int, tool_use_id: str, part: str) -> HttpResponse:
    """The whole input, result or file list of one tool call, as text (cards show them cut)."""
    conversation = _get_conversation_for_user(request, pk)
    if part not in TOOL_TEXT_PARTS:
        raise Http404("No such part of a tool call.")
    can_inspect = request.user.has_perm(INSPECT_PERMISSION)
    texts = conv.tool_texts(conversation, tool_use_id, can_inspect=can_inspect)
    if part not in texts:
        raise Http404("No such tool call in this conversation.")
    # The same filter as the card: a non-inspector's full result is still filtered, and paths
    # are relative to the workspace, as on the card.
    text = outbound(pk, can_inspect=can_inspect).text(texts[part])
    text = relative(text, workspace_roots(pk))
    response = HttpResponse(text, content_type="text/plain; charset=utf-8")
    response["X-Content-Type-Options"] = "nosniff"
    return response


def _redirect(request: AuthedHttpRequest, url: str) -> HttpResponse:
    """A redirect that htmx follows as a full page change."""
    if request.htmx:
        response = HttpResponse(status=204)
        response["HX-Redirect"] = url
        return response
    return redirect(url)
