"""The base of every run event (`RunEvent`): its dotted wire type, the traits it travels by, and
its JSON codec (`data()` out, `from_data()` back, refusing data that does not fit).

The events themselves are declared in `events.py`, one class per type.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from typing import Any, ClassVar


class EventDataError(ValueError):
    """Stored or received event data does not fit its event type."""


@dataclass(frozen=True, slots=True)
class RunEvent:
    """Base of every event: a dotted wire type and JSON data."""

    type: ClassVar[str] = ""
    # Stored in the conversation's event log (with a seq) rather than only sent live.
    stored: ClassVar[bool] = True
    # A piece of a streamed block of this kind ("text" | "thinking"), live or saved; "" if not.
    stream: ClassVar[str] = ""
    # From this event on, the run's streamed text is held by stored rows (or over): whoever
    # follows the run's streams (the recorder, a tab) lets them go.
    ends_streams: ClassVar[bool] = False

    def data(self) -> dict[str, Any]:
        return {f.name: jsonable(getattr(self, f.name)) for f in fields(self) if f.repr}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> RunEvent:
        """The event from its JSON; unknown keys are ignored, a missing required one is an error."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            if not f.repr:
                continue
            if f.name in data:
                value = data[f.name]
                values[f.name] = tuple(value) if isinstance(value, list) and _is_tuple(f) else value
            elif f.default is MISSING and f.default_factory is MISSING:
                raise EventDataError(f"a {cls.type} event needs {f.name!r}; got {sorted(data)}")
        return cls(**values)


def _is_tuple(f: Any) -> bool:
    return str(f.type).startswith("tuple")


def jsonable(value: Any) -> Any:
    """`value` as JSON can hold it: dicts with text keys, lists, scalars; anything else as text."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)
