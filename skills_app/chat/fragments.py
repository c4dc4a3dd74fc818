"""Stored events rendered for one visibility class: live, on a replay, and on the chat page.

Runs announce a stored event as data; the consumer of a tab renders it for its viewer with
`fragment_for` (through `chat.relay`'s per-process cache, so many tabs of one conversation render
it once per visibility class), and `chat.items` is the one visibility filter. A tab that resumes
or missed events gets them rendered from the stored rows (`replay_html`), through the same parts;
the chat page renders its transcript through them too (`page_html`). What each event shows is
declared once, in `chat/event_views.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from skills_app.chat.conversations import transcript_context
from skills_app.chat.event_views import Lookup, Needs, announced, needs_of, parts_for
from skills_app.chat.items import (
    REPLACE,
    ApprovalItem,
    ElicitationItem,
    MessageItem,
    Part,
    QueuedItem,
    html_for,
    wrap,
)
from skills_app.chat.rendering import MARKDOWN_MEMO
from skills_app.chat.usage import render_conversation_cost
from skills_app.core.events import EventDataError, RunEvent, event_from
from skills_app.mcp.elicitations import asked_event, pending_elicitations
from skills_app.models import Approval, Conversation, Message, QueuedMessage
from skills_app.models import RunEvent as StoredEvent

__all__ = [
    "Replayed",
    "approvals_page_html",
    "fragment_for",
    "page_html",
    "queued_page_html",
    "replay_html",
]


def fragment_for(
    event: RunEvent,
    *,
    conversation_id: int,
    can_inspect: bool,
    memo: dict[str, str] | None = None,
) -> str | None:
    """A just-stored event's HTML for one visibility class (sync: it reads its rows).

    None when that class is shown nothing of it. `memo`: markdown already rendered for this
    event (the other class's render of it), filled as it goes.
    """
    needs = needs_of(event)
    lookup = _load(conversation_id, [needs])
    lookup.ctx = {MARKDOWN_MEMO: memo if memo is not None else {}}
    if needs.cost:
        lookup.cost_html = render_conversation_cost(conversation_id, oob=True)
    return html_for(parts_for(event, conversation_id, lookup), can_inspect=can_inspect)


def _load(conversation_id: int, needs: Sequence[Needs]) -> Lookup:
    """The rows of this conversation that `needs` name, each kind in one query."""
    return Lookup(
        messages=_messages(conversation_id, [pk for n in needs for pk in n.messages]),
        approvals=_approvals(conversation_id, [pk for n in needs for pk in n.approvals]),
        queued=_queued(conversation_id, [pk for n in needs for pk in n.queued]),
    )


class Replayed(NamedTuple):
    """A stored event for one viewer: its seq, type, announced fields and html (None: nothing)."""

    seq: int
    type: str
    data: dict[str, Any]
    html: str | None


def replay_html(
    conversation_id: int, stored: Sequence[StoredEvent], *, can_inspect: bool
) -> list[Replayed]:
    """Stored events for this viewer, rendered from the rows as they are now."""
    typed: list[tuple[StoredEvent, RunEvent | None]] = []
    for row in stored:
        event: RunEvent | None = None
        if can_inspect or not row.hidden:
            try:
                event = event_from(row.type, row.data)
            except EventDataError:
                event = None  # a type this code does not know: nothing to show
        typed.append((row, event))
    lookup = _load(conversation_id, [needs_of(e) for _r, e in typed if e is not None])
    if not can_inspect:
        lookup.messages = {pk: m for pk, m in lookup.messages.items() if not m.is_meta}
    if any(m.role == Message.ASSISTANT for m in lookup.messages.values()):
        conversation = Conversation.objects.get(pk=conversation_id)
        lookup.ctx = transcript_context(
            conversation, list(lookup.messages.values()), can_inspect=can_inspect
        )
    out: list[Replayed] = []
    for row, event in typed:
        if event is None:
            out.append(Replayed(row.seq, row.type, {}, None))
            continue
        html = html_for(parts_for(event, conversation_id, lookup), can_inspect=can_inspect)
        out.append(Replayed(row.seq, event.type, announced(event), html))
    return out


def page_html(
    conversation_id: int, rows: Sequence[Message], ctx: dict[str, Any], *, can_inspect: bool
) -> list[str]:
    """The chat page's transcript rows, through the same filter as the live fragments."""
    html = []
    for row in rows:
        rendered = html_for([Part(MessageItem(row, ctx), REPLACE)], can_inspect=can_inspect)
        if rendered:
            html.append(rendered)
    return html


def approvals_page_html(
    conversation_id: int, approvals: Sequence[Approval], *, can_inspect: bool
) -> list[str]:
    """Pending approvals on the chat page, through the same filter."""
    parts = [Part(ApprovalItem(a), REPLACE) for a in approvals]
    # An MCP server's question waiting for its answer, as its card.
    parts += [
        Part(ElicitationItem(conversation_id, asked_event(e).data()), REPLACE)
        for e in pending_elicitations(conversation_id)
    ]
    return [html_for([p], can_inspect=can_inspect) or "" for p in parts]


def _messages(conversation_id: int, ids: Sequence[int]) -> dict[int, Message]:
    if not ids:
        return {}
    return {
        m.pk: m
        for m in Message.objects.select_related("run", "invocation").filter(
            pk__in=list(ids), conversation_id=conversation_id
        )
    }


def _queued(conversation_id: int, ids: Sequence[int]) -> dict[int, QueuedMessage]:
    if not ids:
        return {}
    rows = QueuedMessage.objects.filter(pk__in=list(ids), conversation_id=conversation_id)
    return {q.pk: q for q in rows}


def queued_page_html(queued: Sequence[QueuedMessage]) -> list[str]:
    """Messages waiting for the run to end, on the chat page (the person's own words)."""
    return [
        wrap(Part(QueuedItem(q), REPLACE), QueuedItem(q).render(can_inspect=False)) for q in queued
    ]


def _approvals(conversation_id: int, ids: Sequence[int]) -> dict[int, Approval]:
    if not ids:
        return {}
    return {
        a.pk: a
        for a in Approval.objects.select_related("answered_by").filter(
            pk__in=list(ids), conversation_id=conversation_id
        )
    }
