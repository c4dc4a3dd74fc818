"""Observers of runs: features that watch what a run emits without `runs` importing them.

A feature subscribes a callable once (in its AppConfig.ready, e.g. `skills_app.telemetry`); the
recorder hands it every event it stores (the typed events of `core.events`), and the service
ports the end of each model call (`ModelCallEnded`, with the usage the API reported), which is
not an event of its own. Observers run in the run's event loop: they must be quick and must not
block (queue work, as the OpenTelemetry batch processor does). An observer that raises is logged
and skipped; it never breaks a run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from skills_app.core.events import RunEvent

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RunContext:
    conversation_id: int
    run_id: int
    user_id: int


@dataclass(frozen=True, slots=True)
class ModelCallEnded:
    """A model call answered (`usage`, `stop_reason`) or failed (`error_kind`)."""

    call: int
    model: str = ""
    response_id: str = ""
    stop_reason: str = ""
    usage: Mapping[str, Any] = field(default_factory=dict)
    error_kind: str = ""


Observed = RunEvent | ModelCallEnded
Observer = Callable[[RunContext, Observed], None]
_observers: list[Observer] = []


def subscribe(observer: Observer) -> None:
    """Watch every run of this process from now on (subscribing twice is once)."""
    if observer not in _observers:
        _observers.append(observer)


def unsubscribe(observer: Observer) -> None:
    if observer in _observers:
        _observers.remove(observer)


def notify(context: RunContext, event: Observed) -> None:
    """Hand `event` to every observer; one that fails is logged, the run goes on."""
    for observer in list(_observers):
        try:
            observer(context, event)
        except Exception:
            logger.exception("a run observer failed on %s", type(event).__name__)
