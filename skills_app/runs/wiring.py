"""What the layers above hand to runs: a renderer, what to do when a run ends, other queued work.

Runs never import a feature. What they need from one is given to them here, once, at start-up,
by the app's entry point (`skills_app/wiring.py`, called from `SkillsAppConfig.ready`):

- `render`: the fragments of a stored event, once per visibility class (the chat's);
- `after_run`: subscribers to a run's end (`RunFinished`), awaited in the run's own task after
  the run itself (the chat sends the next queued message, then titles the conversation);
- `worker_duties`: other queued work a run worker claims beside runs (trigger tests).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from skills_app.core.events import RunEvent, RunFinished
from skills_app.models import Message


@dataclass(frozen=True, slots=True)
class Fragments:
    """An event's HTML for ordinary users (None: nothing for them) and for inspectors."""

    public: str | None
    inspector: str | None


class Renderer(Protocol):
    """Renders a just-stored event for both visibility classes (sync: it may read rows)."""

    def __call__(
        self, event: RunEvent, *, conversation_id: int, row: Message | None = None
    ) -> Fragments | None: ...


class AfterRun(Protocol):
    """Something to do when a run of the conversation has ended (it may start another run)."""

    def __call__(self, conversation_id: int, finished: RunFinished) -> Awaitable[None]: ...


# Runs a sync function off the event loop (a worker's own database thread).
Database = Callable[..., Awaitable[Any]]


class WorkerDuty(Protocol):
    """Queued work a run worker claims on every tick, beside runs, and gives up when it stops."""

    async def claim_and_start(self, *, worker: str, database: Database | None = None) -> int: ...

    async def give_up_here(self) -> None: ...


class NotWired(RuntimeError):
    """Runs were used before the app's entry point handed them what they need."""


def _not_wired(event: RunEvent, *, conversation_id: int, row: Message | None = None) -> None:
    raise NotWired(
        "runs has no renderer: skills_app.wiring.wire() (called by SkillsAppConfig.ready) "
        "hands it the chat's"
    )


@dataclass(frozen=True, slots=True)
class Wiring:
    render: Renderer = _not_wired
    after_run: tuple[AfterRun, ...] = ()
    worker_duties: tuple[WorkerDuty, ...] = ()


_wiring = Wiring()


def wire(
    *,
    render: Renderer,
    after_run: Sequence[AfterRun] = (),
    worker_duties: Sequence[WorkerDuty] = (),
) -> None:
    """Hand runs what the layers above give them (replacing what was handed before)."""
    global _wiring
    _wiring = Wiring(render=render, after_run=tuple(after_run), worker_duties=tuple(worker_duties))


def current() -> Wiring:
    return _wiring


def render(
    event: RunEvent, *, conversation_id: int, row: Message | None = None
) -> Fragments | None:
    """The wired renderer's fragments of a stored event."""
    return _wiring.render(event, conversation_id=conversation_id, row=row)


async def claim_and_start(*, worker: str, database: Database | None = None) -> None:
    """Let every worker duty claim and start what it has room for."""
    for duty in _wiring.worker_duties:
        await duty.claim_and_start(worker=worker, database=database)


async def give_up_here() -> None:
    """The worker is stopping: every worker duty gives up what it executes here."""
    for duty in _wiring.worker_duties:
        await duty.give_up_here()
