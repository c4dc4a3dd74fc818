"""What each event looks like in the browser: one entry per event type people see.

A stored event's entry says which rows its parts need (`Needs`: loaded once, for one live event
or a whole replay), turns the event into parts (`chat.items`), which render themselves per
visibility class, and names the fields of the event its frame carries as data (`announces`:
ids and states, never text or names, which reach a browser only through the visibility filter).
An entry whose parts are our own markup made from the event's data alone (`markup_only`: no
rows, no filter) renders without the database. A live event's entry makes the frame a tab is
sent. An event type without an entry shows nothing (it is stored for the audit or the log, and
keeps its place in the seq).

This is the only place in the chat that names event types: the recorder stores events and the
consumer relays them by the traits their classes declare (`core.events`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from skills_app.chat import frames, tool_cards
from skills_app.chat.controls import (
    live_area,
    queued_notice,
    queued_notice_gone,
    stop_button,
    title_html,
)
from skills_app.chat.items import (
    APPEND,
    REPLACE,
    UPDATE,
    ApprovalItem,
    ElicitationItem,
    MessageItem,
    Part,
    QueuedItem,
    SkillChipItem,
    StaticItem,
    ToolResultItem,
)
from skills_app.core.event_base import jsonable
from skills_app.core.events import (
    ApprovalAnswered,
    ApprovalRequested,
    BlockStarted,
    ConversationTitled,
    ElicitationAnswered,
    ElicitationAsked,
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
)
from skills_app.models import Approval, Message, QueuedMessage

# The tool the model loads skills with: its result shows as the skill's chip, not a tool card.
SKILL_TOOL = "Skill"


@dataclass(frozen=True, slots=True)
class Needs:
    """The rows (by id) the parts of one event are made from."""

    messages: tuple[int, ...] = ()
    approvals: tuple[int, ...] = ()
    queued: tuple[int, ...] = ()
    # The conversation's cost for the header (live only: a replay has the page's).
    cost: bool = False


NOTHING = Needs()


@dataclass(slots=True)
class Lookup:
    """The rows the parts need, loaded once (live: one event; replay: a batch)."""

    messages: Mapping[int, Message] = field(default_factory=dict)
    approvals: Mapping[int, Approval] = field(default_factory=dict)
    queued: Mapping[int, QueuedMessage] = field(default_factory=dict)
    ctx: dict[str, Any] | None = None
    cost_html: str = ""


Parts = Callable[[Any, int, Lookup], list[Part]]


@dataclass(frozen=True, slots=True)
class StoredView:
    parts: Parts
    needs: Callable[[Any], Needs]
    announces: tuple[str, ...]
    # The parts are markup of our own from the event's data alone: no rows, no filter.
    markup_only: bool = False


STORED: dict[type[RunEvent], StoredView] = {}
LIVE: dict[type[RunEvent], Callable[[Any], str | None]] = {}

E = TypeVar("E", bound=RunEvent)
# A function making an event's parts: (event, conversation id, lookup) -> parts.
P = TypeVar("P", bound=Callable[..., list[Part]])


def shows(
    cls: type[E],
    needs: Callable[[E], Needs] = lambda _event: NOTHING,
    announces: tuple[str, ...] = (),
    *,
    markup_only: bool = False,
) -> Callable[[P], P]:
    """Register what a stored event type shows (its parts), the rows they need and the fields
    its frame carries as data.

    `markup_only`: the parts are our own markup made from the event's data alone (they read no
    rows and pass nothing through the filter), so they render without the database.
    """
    assert cls.stored, f"{cls.type} is not stored: register a live frame instead"
    unknown = set(announces) - {f.name for f in fields(cls)}
    assert not unknown, f"{cls.type} has no field {', '.join(sorted(unknown))}"

    def register(parts: P) -> P:
        assert cls not in STORED, f"{cls.type} already shows something"
        STORED[cls] = StoredView(parts, needs, announces, markup_only)
        return parts

    return register


def frame(
    cls: type[E],
) -> Callable[[Callable[[E], str | None]], Callable[[E], str | None]]:
    """Register the frame a live (not stored) event type sends a tab."""
    assert not cls.stored, f"{cls.type} is stored: register its parts with @shows"

    def register(make: Callable[[E], str | None]) -> Callable[[E], str | None]:
        LIVE[cls] = make
        return make

    return register


def has_view(cls: type[RunEvent]) -> bool:
    """Whether a stored event type shows anything in the browser."""
    return cls in STORED


def reads_rows(event: RunEvent) -> bool:
    """Whether rendering a stored event reads the database (its rows, the filter's index)."""
    view = STORED.get(type(event))
    if view is None:
        return False
    return not view.markup_only or view.needs(event) != NOTHING


def needs_of(event: RunEvent) -> Needs:
    view = STORED.get(type(event))
    return view.needs(event) if view is not None else NOTHING


def announced(event: RunEvent) -> dict[str, Any]:
    """The fields of a stored event its frame carries as data (its ids and states)."""
    view = STORED.get(type(event))
    if view is None:
        return {}
    return {name: jsonable(getattr(event, name)) for name in view.announces}


def parts_for(event: RunEvent, conversation_id: int, lookup: Lookup) -> list[Part]:
    """What the browser shows of one stored event, as parts (none for most events)."""
    view = STORED.get(type(event))
    return view.parts(event, conversation_id, lookup) if view is not None else []


def live_frame(event: RunEvent) -> str | None:
    """The frame of a live event for a tab (None: nothing to show)."""
    make = LIVE.get(type(event))
    return make(event) if make is not None else None


# -- stored events ----------------------------------------------------------------------------


@shows(
    MessageStored,
    needs=lambda e: Needs(messages=(e.message_id,)),
    announces=("message_id", "role", "kind", "run_id"),
)
def _message(event: MessageStored, conversation_id: int, lookup: Lookup) -> list[Part]:
    row = lookup.messages.get(event.message_id)
    if row is None:
        return []
    parts = [Part(MessageItem(row, lookup.ctx), replaces=_chip_replaced(row))]
    if row.role == Message.ASSISTANT:
        parts.append(Part(StaticItem(live_area()), REPLACE))
    parts.extend(_stopped_calls(conversation_id, row))
    return parts


def _stopped_calls(conversation_id: int, row: Message) -> list[Part]:
    """Updates for the cards and chips of the calls a stop closed: "stopped", never "Running…".

    Reads the answer the calls belong to: once per stop, the only event that needs it.
    """
    if row.kind != "tool_result" or not (row.meta or {}).get("stopped"):
        return []
    asked = (
        Message.objects.filter(
            conversation_id=conversation_id, role=Message.ASSISTANT, seq__lt=row.seq
        )
        .exclude(kind__in=("notice", "error"))
        .order_by("-seq")
        .first()
    )
    calls = {
        str(b.get("id", "")): b
        for b in (asked.content if asked is not None else [])
        if b.get("type") == "tool_use"
    }
    parts = []
    for block in row.content:
        if block.get("type") != "tool_result" or not tool_cards.is_stopped_result(block):
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
            data = tool_cards.result_from_block(block)
            parts.append(Part(ToolResultItem(conversation_id, call["id"], data), UPDATE))
    return parts


def _chip_replaced(row: Message) -> str:
    invocation = row.invocation if row.invocation_id else None
    if row.kind == "skill_status" and invocation is not None and invocation.tool_use_id:
        return f"skill-{invocation.tool_use_id}"
    return ""


@shows(ToolFinished, announces=("tool_use_id", "is_error"))
def _tool_result(event: ToolFinished, conversation_id: int, lookup: Lookup) -> list[Part]:
    if event.name == SKILL_TOOL:
        return []  # the skill's chip says it (skill.invocation)
    return [Part(ToolResultItem(conversation_id, event.tool_use_id, event.data()), UPDATE)]


@shows(SkillInvoked, announces=("tool_use_id", "decision"))
def _skill_chip(event: SkillInvoked, conversation_id: int, lookup: Lookup) -> list[Part]:
    if not event.tool_use_id:
        return []  # a slash command: its status row shows it
    state = {"allowed": "loaded", "denied": "denied"}.get(event.decision, "failed")
    chip = SkillChipItem(
        conversation_id, event.tool_use_id, event.skill, event.args, state, event.error
    )
    return [Part(chip, UPDATE)]


@shows(
    ApprovalRequested,
    needs=lambda e: Needs(approvals=(e.approval_id,)),
    announces=("approval_id",),
)
@shows(
    ApprovalAnswered,
    needs=lambda e: Needs(approvals=(e.approval_id,)),
    announces=("approval_id", "status"),
)
def _approval(
    event: ApprovalRequested | ApprovalAnswered, conversation_id: int, lookup: Lookup
) -> list[Part]:
    approval = lookup.approvals.get(event.approval_id)
    if approval is None:
        return []
    swap = APPEND if isinstance(event, ApprovalRequested) else UPDATE
    return [Part(ApprovalItem(approval), swap)]


@shows(ElicitationAsked, announces=("elicitation_id", "status"))
@shows(ElicitationAnswered, announces=("elicitation_id", "status"))
def _elicitation(
    event: ElicitationAsked | ElicitationAnswered, conversation_id: int, lookup: Lookup
) -> list[Part]:
    swap = APPEND if isinstance(event, ElicitationAsked) else UPDATE
    return [Part(ElicitationItem(conversation_id, event.data()), swap)]


@shows(TurnExcluded, needs=lambda e: Needs(messages=e.message_ids), announces=("message_ids",))
def _excluded(event: TurnExcluded, conversation_id: int, lookup: Lookup) -> list[Part]:
    rows = [lookup.messages[pk] for pk in event.message_ids if pk in lookup.messages]
    return [Part(MessageItem(row, lookup.ctx), UPDATE) for row in rows]


@shows(MessageQueued, needs=lambda e: Needs(queued=(e.queued_id,)), announces=("queued_id",))
@shows(
    QueuedMessageGone,
    needs=lambda e: Needs(queued=(e.queued_id,)),
    announces=("queued_id", "status"),
)
def _queued(
    event: MessageQueued | QueuedMessageGone, conversation_id: int, lookup: Lookup
) -> list[Part]:
    queued = lookup.queued.get(event.queued_id)
    if queued is None:
        return []
    return [Part(QueuedItem(queued), APPEND if isinstance(event, MessageQueued) else UPDATE)]


@shows(ConversationTitled, markup_only=True)
def _titled(event: ConversationTitled, conversation_id: int, lookup: Lookup) -> list[Part]:
    return [Part(StaticItem(title_html(conversation_id, event.title)), UPDATE)]


@shows(RunQueued, announces=("run_id",), markup_only=True)
def _run_queued(event: RunQueued, conversation_id: int, lookup: Lookup) -> list[Part]:
    return [
        Part(StaticItem(queued_notice(event.run_id))),
        Part(StaticItem(stop_button("queued")), REPLACE),
    ]


@shows(RunStarted, announces=("run_id",), markup_only=True)
def _run_started(event: RunStarted, conversation_id: int, lookup: Lookup) -> list[Part]:
    return [
        Part(StaticItem(stop_button("running")), REPLACE),
        Part(StaticItem(queued_notice_gone(event.run_id)), UPDATE),
    ]


@shows(RunFinished, needs=lambda e: Needs(cost=True), announces=("run_id", "status", "kind"))
def _run_finished(event: RunFinished, conversation_id: int, lookup: Lookup) -> list[Part]:
    parts = [
        Part(StaticItem(stop_button(event.status)), REPLACE),
        Part(StaticItem(live_area()), REPLACE),
        Part(StaticItem(queued_notice_gone(event.run_id)), UPDATE),
    ]
    if lookup.cost_html:
        parts.append(Part(StaticItem(lookup.cost_html), REPLACE))
    # A stop's note is a stored row (`runs.store.stop_note`), shown by its own event.
    return parts


# -- live events ------------------------------------------------------------------------------


@frame(BlockStarted)
def _calling(event: BlockStarted) -> str | None:
    """A tool call's input is streaming: "Calling X…" until its row lands."""
    if not event.tool_name:
        return None
    return frames.calling(event.run_id, event.call, event.index, event.tool_name)
