"""Read-only links to a conversation: the owner makes, lists and revokes them; a signed-in person of this instance opens one at /s/<token>/.

Who may open a link: any signed-in user of this instance, never an anonymous visitor. Skillscope
is an organisation's own tool; a link that worked outside it would carry the organisation's
conversations to anyone it is forwarded to.

What the link shows is rendered for the VIEWER, not for the owner: the same partials and the
same outbound filter as the chat page, with the viewer's visibility class (inspect permission
or not) and the viewer's hidden index (`outbound(..., viewer_id=...)`: the owner's personal
skills and own words are not carved out for someone else). Hidden rows are left out for a
non-inspector; a skill the viewer may not see is shown as withheld, not by name. No websocket,
no composer, no export. A revoked, expired or unknown token, or one of a deleted conversation,
answers the same 404, so a link's state is no oracle. Making, opening and revoking a link are
recorded in the audit trail.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from skills_app import trail
from skills_app.chat import conversations as conv
from skills_app.chat import rendering
from skills_app.core.transcript import parse_status_message, text_of
from skills_app.http import AuthedHttpRequest
from skills_app.models import AuditEvent, Conversation, ConversationShare, Message
from skills_app.models.shares import DEFAULT_EXPIRY_DAYS, EXPIRY_CHOICES, token_digest
from skills_app.registry.skills import skills_for_user
from skills_app.visibility import Outbound, outbound
from skills_app.visibility import can_inspect as may_inspect

# What a Skill call names when the viewer may not see that skill.
WITHHELD_SKILL = "withheld skill"
# Blocks of someone's own words and the model's prose, and the key of their text.
PROSE_KEYS = {"text": "text", "thinking": "thinking"}
# A placeholder of the outbound filter (`core.redact.placeholder`): its label names the skill file.
PLACEHOLDER = re.compile(r"\[hidden [^\[\]\n]{0,300}? withheld: ([0-9,]+) characters\]")


class SharedOutbound(Outbound):
    """The viewer's filter, whose placeholders do not name the skill or file they stand for
    (the viewer may not be allowed to know that skill exists)."""

    def text(self, text: str) -> str:
        shown = super().text(text)
        if self.can_inspect or shown is text:
            return shown
        return PLACEHOLDER.sub(r"[hidden skill text withheld: \1 characters]", shown)


def _owned_conversation(request: AuthedHttpRequest, pk: int) -> Conversation:
    """The conversation if the requesting user owns it and has not deleted it; 404 otherwise."""
    try:
        return Conversation.objects.owned_by(request.user).get(pk=pk)
    except Conversation.DoesNotExist:
        raise Http404("No such conversation.") from None


@login_required
@require_http_methods(["GET", "POST"])
def conversation_shares(request: AuthedHttpRequest, pk: int) -> HttpResponse:
    """The owner's links to this conversation; POST makes a new one and shows it once."""
    conversation = _owned_conversation(request, pk)
    new_link = ""
    error = ""
    if request.method == "POST":
        raw = request.POST.get("days", str(DEFAULT_EXPIRY_DAYS))
        allowed = {str(days): days for days, _label in EXPIRY_CHOICES}
        if raw not in allowed:
            error = "Choose how long the link works: " + ", ".join(
                label for _days, label in EXPIRY_CHOICES
            )
        else:
            share, token = ConversationShare.create_for(
                conversation, request.user, days=allowed[raw]
            )
            trail.record(
                AuditEvent.SHARE_CREATED,
                actor=request.user,
                target=f"conversation #{conversation.pk}",
                conversation_id=conversation.pk,
                share_id=share.pk,
                expires_at=share.expires_at.isoformat(),
            )
            new_link = request.build_absolute_uri(reverse("shared-conversation", args=[token]))
    shares = list(ConversationShare.objects.filter(conversation=conversation))
    response = render(
        request,
        "skills_app/chat/shares.html",
        {
            "conversation": conversation,
            "shares": shares,
            "new_link": new_link,
            "error": error,
            "expiry_choices": EXPIRY_CHOICES,
        },
        status=400 if error else 200,
    )
    # The page may hold a working link: never kept by a cache.
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def conversation_share_revoke(request: AuthedHttpRequest, pk: int, share_id: int) -> HttpResponse:
    """Stop one link from working, for good (the owner only)."""
    conversation = _owned_conversation(request, pk)
    revoked = ConversationShare.objects.filter(
        pk=share_id, conversation=conversation, revoked_at__isnull=True
    ).update(revoked_at=timezone.now())
    if (
        not revoked
        and not ConversationShare.objects.filter(pk=share_id, conversation=conversation).exists()
    ):
        raise Http404("No such link.")
    if revoked:
        trail.record(
            AuditEvent.SHARE_REVOKED,
            actor=request.user,
            target=f"conversation #{conversation.pk}",
            conversation_id=conversation.pk,
            share_id=share_id,
        )
    return redirect("conversation-shares", pk=conversation.pk)


@dataclass(frozen=True, slots=True)
class SharedView:
    """What one viewer is shown of a shared conversation."""

    messages_html: list[str]
    earlier: int


def shared_messages(conversation: Conversation, viewer: Any) -> SharedView:
    """The conversation's newest page as this viewer may see it (read-only partials)."""
    inspect = may_inspect(viewer)
    page = conv.transcript_page(conversation, can_inspect=inspect)
    ctx = conv.transcript_context(conversation, page.rows, can_inspect=inspect)
    # The viewer's filter, not the owner's; no Retry on someone else's conversation.
    ctx["outbound"] = _viewer_filter(conversation, viewer, inspect)
    ctx["retry_id"] = None
    ctx["read_only"] = True
    visible = _skill_shown(viewer.pk, inspect)
    # The chat leaves its owner's words and the model's prose as written (the audit marks an
    # answer that quotes hidden text); someone else without the inspect permission gets them
    # through the filter too: a link never carries hidden text to them.
    prose = ctx["outbound"] if not inspect and viewer.pk != conversation.owner_id else None
    html: list[str] = []
    for row in page.rows:
        if prose is not None:
            row.content = _filtered_prose(row.content, prose)
        if row.kind == "skill_status":
            status = parse_status_message(text_of(row.content)) or {}
            if not visible(str(status.get("name") or row.meta.get("skill", ""))):
                html.append(render_to_string("skills_app/chat/_withheld_skill.html", {"m": row}))
                continue
        elif row.role == Message.ASSISTANT:
            row.content = _withhold_skill_calls(row.content, visible)
        html.append(rendering.render_message(row, can_inspect=inspect, ctx=ctx))
    return SharedView(html, page.earlier)


def _viewer_filter(conversation: Conversation, viewer: Any, inspect: bool) -> Outbound:
    """The owner reads their own link as in the chat; anyone else without the inspect
    permission gets placeholders that name nothing."""
    if viewer.pk == conversation.owner_id:
        return outbound(conversation.pk, can_inspect=inspect)
    return SharedOutbound(conversation.pk, can_inspect=inspect, viewer_id=viewer.pk)


def _filtered_prose(content: Any, out: Outbound) -> Any:
    """Content whose text and thinking blocks passed the viewer's filter."""
    if not isinstance(content, list):
        return content
    shown = []
    for block in content:
        if isinstance(block, dict) and block.get("type") in PROSE_KEYS:
            key = PROSE_KEYS[block["type"]]
            if isinstance(block.get(key), str):
                block = {**block, key: out.text(block[key])}
        shown.append(block)
    return shown


def _skill_shown(viewer_id: int, inspect: bool) -> Any:
    """name -> whether the viewer may see that the skill was used (inspectors see all)."""
    if inspect:
        return lambda name: True
    skills = skills_for_user(viewer_id)
    return lambda name: bool(name) and skills.get(name) is not None


def _withhold_skill_calls(content: Any, visible: Any) -> Any:
    """Content whose Skill calls name a skill the viewer may not see, and their args, withheld."""
    if not isinstance(content, list):
        return content
    changed = []
    for block in content:
        if (
            isinstance(block, dict)
            and block.get("type") == "tool_use"
            and block.get("name") == "Skill"
        ):
            tool_input = block.get("input") or {}
            name = str(tool_input.get("skill") or tool_input.get("command") or "")
            if not visible(name):
                block = {**block, "input": {"skill": WITHHELD_SKILL}}
        changed.append(block)
    return changed


# A viewer's opening of a link is written to the audit once per this span: reloads within it add
# no row (else one person reloading could grow the append-only audit without end).
VIEW_RECORDED_EVERY = timedelta(hours=1)


def _viewed_lately(share: ConversationShare, viewer: User) -> bool:
    return AuditEvent.objects.filter(
        action=AuditEvent.SHARE_VIEWED,
        actor=viewer,
        detail__share_id=share.pk,
        created_at__gte=timezone.now() - VIEW_RECORDED_EVERY,
    ).exists()


@login_required
@require_safe
def shared_conversation(request: AuthedHttpRequest, token: str) -> HttpResponse:
    """A shared conversation, read-only, for the signed-in viewer's visibility class."""
    share = (
        ConversationShare.objects.live()
        .select_related("conversation", "conversation__owner")
        .filter(token_hash=token_digest(token))
        .first()
    )
    if share is None:
        # Revoked, expired, unknown or of a deleted conversation: one answer for all.
        response = render(request, "skills_app/chat/shared_missing.html", status=404)
        _private(response)
        return response
    conversation = share.conversation
    view = shared_messages(conversation, request.user)
    if request.method == "GET" and not _viewed_lately(share, request.user):
        trail.record(
            AuditEvent.SHARE_VIEWED,
            actor=request.user,
            target=f"conversation #{conversation.pk}",
            conversation_id=conversation.pk,
            share_id=share.pk,
            inspector=may_inspect(request.user),
        )
    response = render(
        request,
        "skills_app/chat/shared.html",
        {
            "conversation": conversation,
            "title": _viewer_filter(conversation, request.user, may_inspect(request.user)).text(
                conversation.title
            ),
            "owner": conversation.owner.get_username(),
            "share": share,
            "messages_html": view.messages_html,
            "earlier": view.earlier,
        },
    )
    _private(response)
    return response


def _private(response: HttpResponse) -> None:
    # The token is in the URL: never sent on as a Referer, never cached, never indexed.
    response["Referrer-Policy"] = "no-referrer"
    response["Cache-Control"] = "no-store"
    response["X-Robots-Tag"] = "noindex, nofollow"
