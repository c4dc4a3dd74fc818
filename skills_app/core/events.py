"""Every event of a run, one typed class per dotted name: what the runner emits, what the services
store in the conversation's event log, and what travels the channel layer to the browser's socket.

Each class names its wire type once (`type`, e.g. `message.stored`); `data()` is its JSON (what
the event log stores and the channel layer carries) and `from_data()` reads it back, so the
recorder, the consumer and the tests share one schema (the base class and its JSON codec are in
`event_base.py`). `EVENT_TYPES` maps every name to its class.

Beside its fields, each class declares how it travels (`stored`, `stream`, `ends_streams`): the
recorder stores or streams it, and the chat's consumer relays it, by these traits alone (no
handler per type). What an event looks like is the one thing declared elsewhere, where the
templates are: `chat/event_views.py`, one entry per event the browser shows. Adding an event type
touches this module, and that one if people see it.

Two kinds of events reach the browser:
- stored events get a per-conversation `seq` in the event log; a browser resumes after the last
  seq it applied and a consumer fills gaps in them from the database;
- live events (`text.delta`, `thinking.delta`, `block.start`) go to the browser from the run and
  are not in the event log: each frame of streamed text is committed as a piece of its own
  (`runs.streams`, identified by run, model call, block index and character offset) before it
  is sent, so a tab that (re)connects mid-answer gets the text so far and then exactly the deltas
  after it. `text.saved` / `thinking.saved` are what event logs of older versions hold.

A model's stream is told in these events too (`ModelEvent`: the adapter yields them, the ports
record them, the runner reads them), ending with `MessageDone`, the one class here that is not a
run event: it carries the whole message to the ports and the runner and is never announced.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .event_base import EventDataError, RunEvent, jsonable

# -- the model's stream ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ModelCalled(RunEvent):
    """The runner is about to send `request` (call numbers count from 1 within the run)."""

    type: ClassVar[str] = "model.call"
    call: int
    model: str
    # The skill invoked last in this turn (its cost is attributed to it); "" before any.
    skill: str = ""
    # The ModelRequest itself, for the services to capture; not part of the stored data.
    request: Any = field(default=None, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class BlockStarted(RunEvent):
    """A content block began streaming (live: the browser shows "Calling X…" for a tool_use)."""

    type: ClassVar[str] = "block.start"
    stored: ClassVar[bool] = False
    index: int
    block_type: str
    tool_name: str | None = None
    tool_use_id: str | None = None
    run_id: int = 0
    call: int = 0


@dataclass(frozen=True, slots=True)
class TextDelta(RunEvent):
    """Text streamed into the text block at `index` of the answer being written.

    The runner emits one per model delta (index and text); the recorder coalesces them and sends
    the browser pieces that also name the run, the model call and the piece's character offset
    in its block (characters as Python counts them: code points).
    """

    type: ClassVar[str] = "text.delta"
    stored: ClassVar[bool] = False
    stream: ClassVar[str] = "text"
    index: int
    text: str
    run_id: int = 0
    call: int = 0
    offset: int = 0

    def data(self) -> dict[str, Any]:
        # Spelled out: this is the one event sent many times a second per stream.
        return _delta_data(self)


@dataclass(frozen=True, slots=True)
class ThinkingDelta(RunEvent):
    """A piece of the model's (summarized) thinking streamed into the block at `index`."""

    type: ClassVar[str] = "thinking.delta"
    stored: ClassVar[bool] = False
    stream: ClassVar[str] = "thinking"
    index: int
    text: str
    run_id: int = 0
    call: int = 0
    offset: int = 0

    def data(self) -> dict[str, Any]:
        return _delta_data(self)


def _delta_data(event: TextDelta | ThinkingDelta) -> dict[str, Any]:
    return {
        "index": event.index,
        "text": event.text,
        "run_id": event.run_id,
        "call": event.call,
        "offset": event.offset,
    }


@dataclass(frozen=True, slots=True)
class TextSaved(RunEvent):
    """Streamed text stored: block `index` of model call `call`, from character `offset` on
    (written by earlier versions; kept so their event logs still read)."""

    type: ClassVar[str] = "text.saved"
    stream: ClassVar[str] = "text"
    run_id: int
    call: int
    index: int
    offset: int
    text: str


@dataclass(frozen=True, slots=True)
class ThinkingSaved(RunEvent):
    """Streamed thinking stored, like `TextSaved`."""

    type: ClassVar[str] = "thinking.saved"
    stream: ClassVar[str] = "thinking"
    run_id: int
    call: int
    index: int
    offset: int
    text: str


@dataclass(frozen=True, slots=True)
class BlockDone(RunEvent):
    """A content block is complete (the stored message row carries it; not logged separately)."""

    type: ClassVar[str] = "block.done"
    stored: ClassVar[bool] = False
    index: int
    block: dict[str, Any]


@dataclass(frozen=True, slots=True)
class MessageDone:
    """The end of a model's stream: the whole assistant message as API JSON (content,
    stop_reason, usage). Not a run event: the ports settle the call with it and the runner stores
    the message as a row; it is never announced."""

    message: dict[str, Any]


# What a model's stream yields (`llm.ModelClient.stream`, `ports.RunPorts.call_model`): the
# blocks as they start, stream and complete, then `MessageDone`. A thinking block's `BlockDone`
# carries its signature: it goes back to the API exactly as received.
ModelEvent = BlockStarted | TextDelta | ThinkingDelta | BlockDone | MessageDone


# -- tools and skills -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolCalled(RunEvent):
    """A tool call passed its hooks and is about to be decided and run."""

    type: ClassVar[str] = "tool.call"
    tool_use_id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolFinished(RunEvent):
    """A tool call's result (for skill tools, the visible part of it)."""

    type: ClassVar[str] = "tool.result"
    tool_use_id: str
    name: str
    is_error: bool
    content: str
    artifacts: tuple[str, ...] = ()
    decision: str | None = None
    reason: str | None = None
    skill: str = ""
    # The tool's telemetry facts (`ToolResult.telemetry`), for the span; not part of the data.
    telemetry: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class SkillInvoked(RunEvent):
    """A skill invocation was decided; the facts only, never the injected text."""

    type: ClassVar[str] = "skill.invocation"
    skill: str
    caller: str
    decision: str
    args: str = ""
    error: str = ""
    tool_use_id: str = ""


@dataclass(frozen=True, slots=True)
class HookRan(RunEvent):
    """A skill hook ran or was skipped (the audit of skill hooks)."""

    type: ClassVar[str] = "audit.hook"
    report: dict[str, Any]

    def data(self) -> dict[str, Any]:
        return dict(jsonable(self.report))

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> RunEvent:
        return cls(report=dict(data))


@dataclass(frozen=True, slots=True)
class ToolAudited(RunEvent):
    """A tool call made under an invoked skill, for that skill's audit."""

    type: ClassVar[str] = "audit.tool"
    tool_use_id: str
    tool: str
    invocation_id: int
    input: dict[str, Any] = field(default_factory=dict)
    is_error: bool = False
    decision: str | None = None
    reason: str | None = None


# -- the conversation and the run -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MessageStored(RunEvent):
    """A message row was stored (`seq` is the row's place in the conversation)."""

    type: ClassVar[str] = "message.stored"
    ends_streams: ClassVar[bool] = True
    message_id: int
    role: str
    kind: str
    is_meta: bool = False
    seq: int = 0
    run_id: int | None = None


@dataclass(frozen=True, slots=True)
class ApprovalRequested(RunEvent):
    """The rules said ask: the user is asked, in every tab, to allow or deny a call."""

    type: ClassVar[str] = "approval.requested"
    approval_id: int
    tool: str = ""
    call: str = ""
    rule: str = ""
    reason: str = ""
    skill: str = ""


@dataclass(frozen=True, slots=True)
class ApprovalAnswered(RunEvent):
    """An approval was answered (or expired, or was cancelled)."""

    type: ClassVar[str] = "approval.answered"
    approval_id: int
    status: str
    by: int | None = None


@dataclass(frozen=True, slots=True)
class ElicitationAsked(RunEvent):
    """An MCP server asked the person a question mid-call: the card with its form, or (when it
    was not put to the person, `why`) the note that it was declined. The card is built from the
    event; the answer is given on the `McpElicitation` row it names."""

    type: ClassVar[str] = "elicitation.asked"
    elicitation_id: int
    server: str = ""
    message: str = ""
    fields: tuple[dict[str, Any], ...] = ()
    status: str = "pending"
    why: str = ""


@dataclass(frozen=True, slots=True)
class ElicitationAnswered(RunEvent):
    """The person accepted, declined or cancelled a server's question (or it timed out, or the
    run stopped): the card shows the outcome, never the values."""

    type: ClassVar[str] = "elicitation.answered"
    elicitation_id: int
    server: str = ""
    message: str = ""
    status: str = ""
    why: str = ""
    by: int | None = None


@dataclass(frozen=True, slots=True)
class RunQueued(RunEvent):
    """The run waits for a worker; the chat says so until `run.started`."""

    type: ClassVar[str] = "run.queued"
    run_id: int


@dataclass(frozen=True, slots=True)
class MessageQueued(RunEvent):
    """A message sent while a run was busy waits for it to end (shown as "queued", cancelable)."""

    type: ClassVar[str] = "message.queued"
    queued_id: int


@dataclass(frozen=True, slots=True)
class QueuedMessageGone(RunEvent):
    """A queued message left the queue: sent, cancelled, or it could not be sent."""

    type: ClassVar[str] = "queued.gone"
    queued_id: int
    status: str
    error: str = ""


@dataclass(frozen=True, slots=True)
class ConversationTitled(RunEvent):
    """The conversation got a title (made after its first answer): every tab shows it."""

    type: ClassVar[str] = "conversation.titled"
    title: str


@dataclass(frozen=True, slots=True)
class TurnExcluded(RunEvent):
    """A failed or declined turn's rows are kept in view and left out of later requests.

    `message_ids` are the visible rows only: ids of hidden rows are not announced to people who
    may not know they exist.
    """

    type: ClassVar[str] = "turn.excluded"
    reason: str
    message_ids: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class RunStarted(RunEvent):
    type: ClassVar[str] = "run.started"
    run_id: int
    model: str = ""
    label: str = ""
    demo: bool = False


@dataclass(frozen=True, slots=True)
class RunFinished(RunEvent):
    """The run ended: done, stopped, failed or interrupted (`kind` says why it did not finish)."""

    type: ClassVar[str] = "run.finished"
    ends_streams: ClassVar[bool] = True
    run_id: int
    status: str
    error: str = ""
    kind: str = ""


@dataclass(frozen=True, slots=True)
class SubagentStarted(RunEvent):
    """A `context: fork` skill started its subagent in child run `run_id`."""

    type: ClassVar[str] = "subagent.started"
    run_id: int
    parent_run_id: int
    skill: str


@dataclass(frozen=True, slots=True)
class SubagentFinished(RunEvent):
    type: ClassVar[str] = "subagent.finished"
    ends_streams: ClassVar[bool] = True
    run_id: int
    parent_run_id: int
    skill: str
    status: str


EVENT_TYPES: dict[str, type[RunEvent]] = {
    cls.type: cls
    for cls in (
        ModelCalled,
        BlockStarted,
        TextDelta,
        ThinkingDelta,
        TextSaved,
        ThinkingSaved,
        BlockDone,
        ToolCalled,
        ToolFinished,
        SkillInvoked,
        HookRan,
        ToolAudited,
        MessageStored,
        ApprovalRequested,
        ElicitationAsked,
        ElicitationAnswered,
        ApprovalAnswered,
        RunQueued,
        RunStarted,
        RunFinished,
        TurnExcluded,
        MessageQueued,
        QueuedMessageGone,
        ConversationTitled,
        SubagentStarted,
        SubagentFinished,
    )
}
# Names event logs written before the rename still hold.
LEGACY_NAMES = {"message": MessageStored.type}


def event_type(name: str) -> type[RunEvent]:
    """The class of a dotted event name (legacy names accepted); EventDataError if unknown."""
    cls = EVENT_TYPES.get(LEGACY_NAMES.get(name, name))
    if cls is None:
        raise EventDataError(f"unknown event type {name!r}; known: {', '.join(EVENT_TYPES)}")
    return cls


def event_from(name: str, data: Mapping[str, Any]) -> RunEvent:
    """The typed event for a dotted name and its JSON data."""
    return event_type(name).from_data(data)


__all__ = [
    "EVENT_TYPES",
    "ApprovalAnswered",
    "ApprovalRequested",
    "ElicitationAnswered",
    "ElicitationAsked",
    "BlockDone",
    "BlockStarted",
    "EventDataError",
    "HookRan",
    "MessageDone",
    "MessageStored",
    "ModelCalled",
    "ModelEvent",
    "RunEvent",
    "RunFinished",
    "RunQueued",
    "RunStarted",
    "SkillInvoked",
    "SubagentFinished",
    "SubagentStarted",
    "TextDelta",
    "TextSaved",
    "ThinkingDelta",
    "ThinkingSaved",
    "ToolAudited",
    "ToolCalled",
    "ToolFinished",
    "TurnExcluded",
    "event_from",
    "event_type",
]
