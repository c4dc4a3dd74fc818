"""What each stored event looks like in the browser, rendered once per visibility class.

When a run stores a message, a tool result, an approval or ends, `fragments_for` renders the
event's HTML twice, for ordinary users (`user_html`) and for inspectors (`inspector_html`); the
recorder sends both with the event and every tab's consumer picks its own, so relaying touches
no database and renders nothing. A tab that resumes or missed events gets them rendered again
from the stored rows (`replay_html`), through the same two functions; the chat page renders its
transcript through them too (`page_html`).

`user_html` is the one place hidden content is filtered out of what a person without the inspect
permission receives: it drops hidden items (`is_meta` rows, hidden events) and passes every item
through `for_user`, which applies `user_text_filter` to the text the item shows (tool inputs and
results, approval prompts, chip arguments; never the model's own prose). Today that filter keeps
text as it is; the verbatim-span redaction of hidden text plugs in there.

Every fragment is an out-of-band swap for htmx's websocket extension. New elements go to the end
of `#transcript` (the client replaces an element whose id it already has, so a replay never
duplicates); updates of elements the tab may or may not have (a tool result, a skill chip, an
answered approval) replace them and are dropped otherwise; the run's controls and the live area
are replaced whole.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from django.template.loader import render_to_string
from django.utils.html import escape

from skills_app.chat import rendering
from skills_app.chat.conversations import transcript_context
from skills_app.core.events import (
    ApprovalAnswered,
    ApprovalRequested,
    EventDataError,
    MessageStored,
    RunEvent,
    RunFinished,
    RunStarted,
    SkillInvoked,
    ToolFinished,
    event_from,
)
from skills_app.models import Approval, Conversation, Message
from skills_app.models import RunEvent as StoredEvent

Redactor = Callable[[str], str]

# Swap styles of a part: a new element, an update of one the tab may have, a whole replacement.
APPEND, UPDATE, REPLACE = "append", "update", "replace"
# The tool the model loads skills with: its result shows as the skill's chip, not a tool card.
SKILL_TOOL = "Skill"


@dataclass(frozen=True, slots=True)
class Fragments:
    """An event's HTML for ordinary users (None: nothing for them) and for inspectors."""

    public: str | None
    inspector: str | None


class Item(Protocol):
    """Something shown in the chat: renders itself and can hand over a filtered copy."""

    @property
    def hidden(self) -> bool: ...

    def render(self, *, can_inspect: bool) -> str: ...

    def redacted(self, redact: Redactor) -> Item: ...


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

    def redacted(self, redact: Redactor) -> MessageItem:
        row = copy.copy(self.row)
        # The model's and the user's own text stays as written; tool calls and results are data.
        row.content = [
            block if block.get("type") == "text" else _redact_value(block, redact)
            for block in self.row.content
        ]
        ctx = None
        if self.ctx is not None:
            results = {k: _redact_value(v, redact) for k, v in self.ctx.get("results", {}).items()}
            ctx = {**self.ctx, "results": results}
        return MessageItem(row, ctx)


@dataclass(frozen=True, slots=True)
class ToolResultItem:
    conversation_id: int
    tool_use_id: str
    data: dict[str, Any]
    hidden: bool = False

    def render(self, *, can_inspect: bool) -> str:
        return rendering.render_tool_result(self.conversation_id, self.tool_use_id, self.data)

    def redacted(self, redact: Redactor) -> ToolResultItem:
        return replace(self, data=_redact_value(self.data, redact))


@dataclass(frozen=True, slots=True)
class SkillChipItem:
    tool_use_id: str
    skill: str
    args: str
    state: str
    error: str = ""
    hidden: bool = False

    def render(self, *, can_inspect: bool) -> str:
        return rendering.render_skill_call(
            self.tool_use_id, self.skill, self.args, self.state, self.error
        )

    def redacted(self, redact: Redactor) -> SkillChipItem:
        return replace(self, args=redact(self.args), error=redact(self.error))


@dataclass(frozen=True, slots=True)
class ApprovalItem:
    approval: Approval
    hidden: bool = False

    def render(self, *, can_inspect: bool) -> str:
        return rendering.render_approval(self.approval)

    def redacted(self, redact: Redactor) -> ApprovalItem:
        approval = copy.copy(self.approval)
        approval.call_text = redact(approval.call_text)
        approval.reason = redact(approval.reason)
        approval.input = _redact_value(approval.input, redact)
        return ApprovalItem(approval)


@dataclass(frozen=True, slots=True)
class StaticItem:
    """Markup of our own (the Stop button, a notice): the same for everyone, nothing to filter."""

    html: str
    hidden: bool = False

    def render(self, *, can_inspect: bool) -> str:
        return self.html

    def redacted(self, redact: Redactor) -> StaticItem:
        return self


# -- the visibility filter ----------------------------------------------------------------------


def user_text_filter(conversation_id: int) -> Redactor | None:
    """How text shown to ordinary users in this conversation is filtered (None: as it is)."""
    return None


def for_user(item: Item, redact: Redactor | None) -> Item | None:
    """The item as a person without the inspect permission may see it; None for hidden items."""
    if item.hidden:
        return None
    return item.redacted(redact) if redact is not None else item


def user_html(parts: Sequence[Part], conversation_id: int) -> str | None:
    """The fragment for ordinary users: every part through `for_user`; None when nothing is left."""
    redact = user_text_filter(conversation_id)
    html = []
    for part in parts:
        item = for_user(part.item, redact)
        if item is not None:
            html.append(_wrap(part, item.render(can_inspect=False)))
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


def _redact_value(value: Any, redact: Redactor) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _redact_value(v, redact) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redact_value(v, redact) for v in value]
    return value


# -- events to parts ------------------------------------------------------------------------------


@dataclass(slots=True)
class Lookup:
    """Rows the parts of some events need, loaded once (live: one event; replay: a batch)."""

    messages: dict[int, Message]
    approvals: dict[int, Approval]
    ctx: dict[str, Any] | None = None


def parts_for(event: RunEvent, conversation_id: int, lookup: Lookup) -> list[Part]:
    """What the browser shows of one stored event, as parts (none for most events)."""
    if isinstance(event, MessageStored):
        row = lookup.messages.get(event.message_id)
        if row is None:
            return []
        parts = [Part(MessageItem(row, lookup.ctx), replaces=_chip_replaced(row))]
        if row.role == Message.ASSISTANT:
            parts.append(Part(StaticItem(live_area()), REPLACE))
        return parts
    if isinstance(event, ToolFinished) and event.name != SKILL_TOOL:
        return [
            Part(ToolResultItem(conversation_id, event.tool_use_id, event.data()), UPDATE),
        ]
    if isinstance(event, SkillInvoked) and event.tool_use_id:
        state = {"allowed": "loaded", "denied": "denied"}.get(event.decision, "failed")
        chip = SkillChipItem(event.tool_use_id, event.skill, event.args, state, event.error)
        return [Part(chip, UPDATE)]
    if isinstance(event, ApprovalRequested | ApprovalAnswered):
        approval = lookup.approvals.get(event.approval_id)
        if approval is None:
            return []
        swap = APPEND if isinstance(event, ApprovalRequested) else UPDATE
        return [Part(ApprovalItem(approval), swap)]
    if isinstance(event, RunStarted):
        return [Part(StaticItem(stop_button("running")), REPLACE)]
    if isinstance(event, RunFinished):
        parts = [
            Part(StaticItem(stop_button(event.status)), REPLACE),
            Part(StaticItem(live_area()), REPLACE),
        ]
        if event.status == "stopped":
            notice = rendering.render_notice("Stopped.", kind="notice", retry=False)
            parts.append(Part(StaticItem(notice)))
        return parts
    return []


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
    elif isinstance(event, ApprovalRequested | ApprovalAnswered):
        lookup.approvals = _approvals(conversation_id, [event.approval_id])
    parts = parts_for(event, conversation_id, lookup)
    if not parts:
        return None
    return Fragments(public=user_html(parts, conversation_id), inspector=inspector_html(parts))


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
    approval_ids = [
        e.approval_id for _r, e in typed if isinstance(e, ApprovalRequested | ApprovalAnswered)
    ]
    messages = {
        m.pk: m
        for m in Message.objects.select_related("run", "invocation").filter(
            pk__in=message_ids, conversation_id=conversation_id
        )
    }
    if not can_inspect:
        messages = {pk: m for pk, m in messages.items() if not m.is_meta}
    lookup = Lookup(messages=messages, approvals=_approvals(conversation_id, approval_ids))
    if any(m.role == Message.ASSISTANT for m in messages.values()):
        conversation = Conversation.objects.get(pk=conversation_id)
        lookup.ctx = transcript_context(
            conversation, list(messages.values()), can_inspect=can_inspect
        )
    out: list[tuple[int, str, str | None]] = []
    for row, event in typed:
        parts = parts_for(event, conversation_id, lookup) if event is not None else []
        html = inspector_html(parts) if can_inspect else user_html(parts, conversation_id)
        out.append((row.seq, event.type if event is not None else row.type, html))
    return out


def page_html(
    conversation_id: int, rows: Sequence[Message], ctx: dict[str, Any], *, can_inspect: bool
) -> list[str]:
    """The chat page's transcript rows, through the same filter as the live fragments."""
    html = []
    for row in rows:
        part = Part(MessageItem(row, ctx), REPLACE)
        rendered = inspector_html([part]) if can_inspect else user_html([part], conversation_id)
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
    return [user_html([p], conversation_id) or "" for p in parts]


def _approvals(conversation_id: int, ids: list[int]) -> dict[int, Approval]:
    if not ids:
        return {}
    return {
        a.pk: a
        for a in Approval.objects.select_related("answered_by").filter(
            pk__in=ids, conversation_id=conversation_id
        )
    }


# -- the run's controls and the live area ---------------------------------------------------------


def stop_button(status: str) -> str:
    """The Stop button, shown while a run is active (replaced whole on run.started/finished).

    It carries the run's status (running, done, stopped, failed, interrupted) for whoever watches.
    """
    running = status == "running"
    context = {"running": running, "status": status, "oob": True}
    return render_to_string("skills_app/chat/_stop_button.html", context)


def live_area() -> str:
    """The live area emptied: the streamed text became a stored row, or the run ended."""
    return '<div id="live" class="live-area" hx-swap-oob="innerHTML"></div>'
