"""What each stored event looks like in the browser, rendered once per visibility class.

When a run stores a message, a tool result, an approval or ends, `fragments_for` renders the
event's HTML twice, for ordinary users (`user_html`) and for inspectors (`inspector_html`); the
recorder sends both with the event and every tab's consumer picks its own, so relaying touches
no database and renders nothing. A tab that resumes or missed events gets them rendered again
from the stored rows (`replay_html`), through the same two functions; the chat page renders its
transcript through them too (`page_html`).

`user_html` is the one place hidden items are dropped from what a person without the inspect
permission receives (`is_meta` rows, hidden events), and every item left renders for ordinary
users: the rendering functions pass the text an item shows (tool inputs and results, approval
prompts, chip errors; never the model's own prose) through `visibility.outbound`, which withholds
every verbatim span of the conversation's hidden text.

Every fragment is an out-of-band swap for htmx's websocket extension. New elements go to the end
of `#transcript` (the client replaces an element whose id it already has, so a replay never
duplicates); updates of elements the tab may or may not have (a tool result, a skill chip, an
answered approval) replace them and are dropped otherwise; the run's controls and the live area
are replaced whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from django.template.loader import render_to_string
from django.utils.html import escape

from skills_app.chat import rendering
from skills_app.chat.controls import (
    live_area,
    queued_notice,
    queued_notice_gone,
    stop_button,
    title_html,
)
from skills_app.chat.conversations import transcript_context
from skills_app.chat.usage import render_conversation_cost
from skills_app.core.events import (
    ApprovalAnswered,
    ApprovalRequested,
    ConversationTitled,
    EventDataError,
    MessageQueued,
    MessageStored,
    QueuedMessageGone,
    RunEvent,
    RunFinished,
    RunQueued,
    RunStarted,
    SkillInvoked,
    ToolFinished,
    TurnExcluded,
    event_from,
)
from skills_app.models import Approval, Conversation, Message, QueuedMessage
from skills_app.models import RunEvent as StoredEvent
from skills_app.runs.wiring import Fragments
from skills_app.visibility import outbound

# Swap styles of a part: a new element, an update of one the tab may have, a whole replacement.
APPEND, UPDATE, REPLACE = "append", "update", "replace"
# The tool the model loads skills with: its result shows as the skill's chip, not a tool card.
SKILL_TOOL = "Skill"


class Item(Protocol):
    """Something shown in the chat: renders itself for one visibility class."""

    @property
    def hidden(self) -> bool: ...

    def render(self, *, can_inspect: bool) -> str: ...


@dataclass(frozen=True, slots=True)
class Part:
    item: Item
    swap: str = APPEND
    # The id of an element this one takes the place of (a skill's chip when its status row lands).
    replaces: str = ""


# -- the items --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MessageItem:
    row: Message
    ctx: dict[str, Any] | None = None

    @property
    def hidden(self) -> bool:
        return bool(self.row.is_meta)

    def render(self, *, can_inspect: bool) -> str:
        return rendering.render_message(self.row, can_inspect=can_inspect, ctx=self.ctx)


@dataclass(frozen=True, slots=True)
class ToolResultItem:
    conversation_id: int
    tool_use_id: str
    data: dict[str, Any]
    hidden: bool = False

    def render(self, *, can_inspect: bool) -> str:
        return rendering.render_tool_result(
            self.conversation_id, self.tool_use_id, self.data, can_inspect=can_inspect
        )


@dataclass(frozen=True, slots=True)
class SkillChipItem:
    conversation_id: int
    tool_use_id: str
    skill: str
    args: str
    state: str
    error: str = ""
    hidden: bool = False

    def render(self, *, can_inspect: bool) -> str:
        return rendering.render_skill_call(
            self.tool_use_id,
            self.skill,
            self.args,
            self.state,
            self.error,
            out=outbound(self.conversation_id, can_inspect=can_inspect),
        )


@dataclass(frozen=True, slots=True)
class ApprovalItem:
    approval: Approval
    hidden: bool = False

    def render(self, *, can_inspect: bool) -> str:
        return rendering.render_approval(self.approval, can_inspect=can_inspect)


@dataclass(frozen=True, slots=True)
class QueuedItem:
    """A message waiting for the run to end (or the trace of one that left the queue)."""

    queued: QueuedMessage
    hidden: bool = False

    def render(self, *, can_inspect: bool) -> str:
        return render_to_string("skills_app/chat/_queued_message.html", {"q": self.queued})


@dataclass(frozen=True, slots=True)
class StaticItem:
    """Markup of our own (the Stop button, a notice): the same for everyone, nothing to filter."""

    html: str
    hidden: bool = False

    def render(self, *, can_inspect: bool) -> str:
        return self.html


# -- the visibility filter ----------------------------------------------------------------------


def user_html(parts: Sequence[Part]) -> str | None:
    """The fragment for ordinary users: hidden items dropped, the rest rendered for them."""
    html = [
        _wrap(part, part.item.render(can_inspect=False)) for part in parts if not part.item.hidden
    ]
    return "".join(html) or None


def inspector_html(parts: Sequence[Part]) -> str | None:
    """The fragment for people who may inspect hidden content: everything."""
    return "".join(_wrap(part, part.item.render(can_inspect=True)) for part in parts) or None


def _wrap(part: Part, html: str) -> str:
    if part.swap == REPLACE:
        return html  # the markup names its own target (hx-swap-oob="true")
    extra = ' data-swap="update"' if part.swap == UPDATE else ""
    if part.replaces:
        extra += f' data-replaces="{escape(part.replaces)}"'
    return f'<div hx-swap-oob="beforeend:#transcript"{extra}>{html}</div>'


# -- events to parts ------------------------------------------------------------------------------


@dataclass(slots=True)
class Lookup:
    """Rows the parts of some events need, loaded once (live: one event; replay: a batch)."""

    messages: dict[int, Message]
    approvals: dict[int, Approval]
    ctx: dict[str, Any] | None = None
    queued: dict[int, QueuedMessage] | None = None
    # The chat header's cost, swapped in when a run ends (live only: a replay has the page's).
    cost_html: str = ""
    # tool_use id -> its block, for the calls a stop closed (their cards and chips say so).
    calls: dict[str, dict[str, Any]] | None = None


def parts_for(event: RunEvent, conversation_id: int, lookup: Lookup) -> list[Part]:
    """What the browser shows of one stored event, as parts (none for most events)."""
    if isinstance(event, MessageStored):
        row = lookup.messages.get(event.message_id)
        if row is None:
            return []
        parts = [Part(MessageItem(row, lookup.ctx), replaces=_chip_replaced(row))]
        if row.role == Message.ASSISTANT:
            parts.append(Part(StaticItem(live_area()), REPLACE))
        parts.extend(_stopped_calls(conversation_id, row, lookup.calls or {}))
        return parts
    if isinstance(event, ToolFinished) and event.name != SKILL_TOOL:
        return [
            Part(ToolResultItem(conversation_id, event.tool_use_id, event.data()), UPDATE),
        ]
    if isinstance(event, SkillInvoked) and event.tool_use_id:
        state = {"allowed": "loaded", "denied": "denied"}.get(event.decision, "failed")
        chip = SkillChipItem(
            conversation_id, event.tool_use_id, event.skill, event.args, state, event.error
        )
        return [Part(chip, UPDATE)]
    if isinstance(event, ApprovalRequested | ApprovalAnswered):
        approval = lookup.approvals.get(event.approval_id)
        if approval is None:
            return []
        swap = APPEND if isinstance(event, ApprovalRequested) else UPDATE
        return [Part(ApprovalItem(approval), swap)]
    if isinstance(event, TurnExcluded):
        rows = [lookup.messages[pk] for pk in event.message_ids if pk in lookup.messages]
        return [Part(MessageItem(row, lookup.ctx), UPDATE) for row in rows]
    if isinstance(event, MessageQueued | QueuedMessageGone):
        queued = (lookup.queued or {}).get(event.queued_id)
        if queued is None:
            return []
        return [Part(QueuedItem(queued), APPEND if isinstance(event, MessageQueued) else UPDATE)]
    if isinstance(event, ConversationTitled):
        return [Part(StaticItem(title_html(conversation_id, event.title)), UPDATE)]
    if isinstance(event, RunQueued):
        return [
            Part(StaticItem(queued_notice(event.run_id))),
            Part(StaticItem(stop_button("queued")), REPLACE),
        ]
    if isinstance(event, RunStarted):
        return [
            Part(StaticItem(stop_button("running")), REPLACE),
            Part(StaticItem(queued_notice_gone(event.run_id)), UPDATE),
        ]
    if isinstance(event, RunFinished):
        parts = [
            Part(StaticItem(stop_button(event.status)), REPLACE),
            Part(StaticItem(live_area()), REPLACE),
            Part(StaticItem(queued_notice_gone(event.run_id)), UPDATE),
        ]
        if lookup.cost_html:
            parts.append(Part(StaticItem(lookup.cost_html), REPLACE))
        # A stop's note is a stored row (`runs.store.stop_note`), shown by its own event.
        return parts
    return []


def _stopped_calls(
    conversation_id: int, row: Message, calls: dict[str, dict[str, Any]]
) -> list[Part]:
    """Updates for the cards and chips of the calls a stop closed: "stopped", never "Running…"."""
    if row.kind != "tool_result" or not row.meta.get("stopped"):
        return []
    parts = []
    for block in row.content:
        if block.get("type") != "tool_result" or not rendering.is_stopped_result(block):
            continue
        call = calls.get(str(block.get("tool_use_id", "")))
        if call is None:
            continue
        if call.get("name") == SKILL_TOOL:
            args = call.get("input") or {}
            name = str(args.get("skill") or args.get("command") or "")
            chip = SkillChipItem(
                conversation_id, call["id"], name, str(args.get("args") or ""), "stopped"
            )
            parts.append(Part(chip, UPDATE))
        else:
            data = rendering.result_from_block(block)
            parts.append(Part(ToolResultItem(conversation_id, call["id"], data), UPDATE))
    return parts


def _calls_before(conversation_id: int, rows: Sequence[Message]) -> dict[str, dict[str, Any]]:
    """tool_use blocks of the answers right before the stop-closed result rows among `rows`."""
    calls: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row.kind != "tool_result" or not row.meta.get("stopped"):
            continue
        asked = (
            Message.objects.filter(
                conversation_id=conversation_id, role=Message.ASSISTANT, seq__lt=row.seq
            )
            .exclude(kind__in=("notice", "error"))
            .order_by("-seq")
            .first()
        )
        for block in asked.content if asked is not None else []:
            if block.get("type") == "tool_use":
                calls[str(block.get("id", ""))] = block
    return calls


def _chip_replaced(row: Message) -> str:
    invocation = row.invocation if row.invocation_id else None
    if row.kind == "skill_status" and invocation is not None and invocation.tool_use_id:
        return f"skill-{invocation.tool_use_id}"
    return ""


def fragments_for(
    event: RunEvent, *, conversation_id: int, row: Message | None = None
) -> Fragments | None:
    """Render a just-stored event for both visibility classes (sync: it may read its row)."""
    lookup = Lookup(messages={}, approvals={})
    if isinstance(event, MessageStored):
        if row is None:
            row = (
                Message.objects.select_related("run", "invocation")
                .filter(pk=event.message_id, conversation_id=conversation_id)
                .first()
            )
        if row is not None:
            lookup.messages[row.pk] = row
            lookup.calls = _calls_before(conversation_id, [row])
    elif isinstance(event, ApprovalRequested | ApprovalAnswered):
        lookup.approvals = _approvals(conversation_id, [event.approval_id])
    elif isinstance(event, TurnExcluded):
        lookup.messages = _messages(conversation_id, event.message_ids)
    elif isinstance(event, RunFinished):
        lookup.cost_html = render_conversation_cost(conversation_id, oob=True)
    elif isinstance(event, MessageQueued | QueuedMessageGone):
        lookup.queued = _queued(conversation_id, [event.queued_id])
    parts = parts_for(event, conversation_id, lookup)
    if not parts:
        return None
    return Fragments(public=user_html(parts), inspector=inspector_html(parts))


def replay_html(
    conversation_id: int, stored: Sequence[StoredEvent], *, can_inspect: bool
) -> list[tuple[int, str, str | None]]:
    """(seq, type, html for this viewer) of stored events, rendered from the rows as they are now."""
    typed: list[tuple[StoredEvent, RunEvent | None]] = []
    for row in stored:
        event: RunEvent | None = None
        if can_inspect or not row.hidden:
            try:
                event = event_from(row.type, row.data)
            except EventDataError:
                event = None  # a type this code does not know: nothing to show
        typed.append((row, event))
    message_ids = [e.message_id for _r, e in typed if isinstance(e, MessageStored)]
    message_ids += [pk for _r, e in typed if isinstance(e, TurnExcluded) for pk in e.message_ids]
    approval_ids = [
        e.approval_id for _r, e in typed if isinstance(e, ApprovalRequested | ApprovalAnswered)
    ]
    messages = _messages(conversation_id, message_ids)
    if not can_inspect:
        messages = {pk: m for pk, m in messages.items() if not m.is_meta}
    lookup = Lookup(messages=messages, approvals=_approvals(conversation_id, approval_ids))
    lookup.calls = _calls_before(conversation_id, list(messages.values()))
    queued_ids = [
        e.queued_id for _r, e in typed if isinstance(e, MessageQueued | QueuedMessageGone)
    ]
    lookup.queued = _queued(conversation_id, queued_ids)
    if any(m.role == Message.ASSISTANT for m in messages.values()):
        conversation = Conversation.objects.get(pk=conversation_id)
        lookup.ctx = transcript_context(
            conversation, list(messages.values()), can_inspect=can_inspect
        )
    out: list[tuple[int, str, str | None]] = []
    for row, event in typed:
        parts = parts_for(event, conversation_id, lookup) if event is not None else []
        html = inspector_html(parts) if can_inspect else user_html(parts)
        out.append((row.seq, event.type if event is not None else row.type, html))
    return out


def page_html(
    conversation_id: int, rows: Sequence[Message], ctx: dict[str, Any], *, can_inspect: bool
) -> list[str]:
    """The chat page's transcript rows, through the same filter as the live fragments."""
    html = []
    for row in rows:
        part = Part(MessageItem(row, ctx), REPLACE)
        rendered = inspector_html([part]) if can_inspect else user_html([part])
        if rendered:
            html.append(rendered)
    return html


def approvals_page_html(
    conversation_id: int, approvals: Sequence[Approval], *, can_inspect: bool
) -> list[str]:
    """Pending approvals on the chat page, through the same filter."""
    parts = [Part(ApprovalItem(a), REPLACE) for a in approvals]
    if can_inspect:
        return [inspector_html([p]) or "" for p in parts]
    return [user_html([p]) or "" for p in parts]


def _messages(conversation_id: int, ids: Sequence[int]) -> dict[int, Message]:
    if not ids:
        return {}
    return {
        m.pk: m
        for m in Message.objects.select_related("run", "invocation").filter(
            pk__in=list(ids), conversation_id=conversation_id
        )
    }


def _queued(conversation_id: int, ids: list[int]) -> dict[int, QueuedMessage]:
    if not ids:
        return {}
    rows = QueuedMessage.objects.filter(pk__in=ids, conversation_id=conversation_id)
    return {q.pk: q for q in rows}


def queued_page_html(queued: Sequence[QueuedMessage]) -> list[str]:
    """Messages waiting for the run to end, on the chat page (the person's own words)."""
    return [
        _wrap(Part(QueuedItem(q), REPLACE), QueuedItem(q).render(can_inspect=False)) for q in queued
    ]


def _approvals(conversation_id: int, ids: list[int]) -> dict[int, Approval]:
    if not ids:
        return {}
    return {
        a.pk: a
        for a in Approval.objects.select_related("answered_by").filter(
            pk__in=ids, conversation_id=conversation_id
        )
    }
