"""The typed events a run emits while it works, one class per event type.

The runner emits them through `RunPorts.emit`; the services persist and broadcast them, and the
consumer relays them. Each class names its wire type once (`type`), and `data()` is the JSON the
event log stores. Rows the run stores (messages, skill invocations) are not events here: the
runner hands them to their own ports, and the services announce them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar


@dataclass(frozen=True, slots=True)
class RunEvent:
    """Base of every event: a dotted wire type and JSON data."""

    type: ClassVar[str] = ""

    def data(self) -> dict[str, Any]:
        return {f.name: _jsonable(getattr(self, f.name)) for f in fields(self) if f.repr}


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
    type: ClassVar[str] = "block.start"
    index: int
    block_type: str
    tool_name: str | None = None
    tool_use_id: str | None = None


@dataclass(frozen=True, slots=True)
class TextDelta(RunEvent):
    """A piece of text streamed into the text block at `index` of the answer being written."""

    type: ClassVar[str] = "text.delta"
    index: int
    text: str


@dataclass(frozen=True, slots=True)
class ThinkingDelta(RunEvent):
    """A piece of the model's (summarized) thinking streamed into the block at `index`."""

    type: ClassVar[str] = "thinking.delta"
    index: int
    text: str


@dataclass(frozen=True, slots=True)
class BlockDone(RunEvent):
    type: ClassVar[str] = "block.done"
    index: int
    block: dict[str, Any]


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


@dataclass(frozen=True, slots=True)
class HookRan(RunEvent):
    """A skill hook ran or was skipped (the audit of skill hooks)."""

    type: ClassVar[str] = "audit.hook"
    report: dict[str, Any]

    def data(self) -> dict[str, Any]:
        return dict(_jsonable(self.report))


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)


__all__ = [
    "BlockDone",
    "BlockStarted",
    "HookRan",
    "ModelCalled",
    "RunEvent",
    "TextDelta",
    "ThinkingDelta",
    "ToolCalled",
    "ToolFinished",
]
