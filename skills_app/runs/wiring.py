"""What the layers above hand to runs: what to do when a run ends, other queued work.

Runs never import a feature. What they need from one is given to them here, once, at start-up,
by the app's entry point (`skills_app/wiring.py`, called from `SkillsAppConfig.ready`):

- `after_run`: subscribers to a run's end (`RunFinished`), awaited in the run's own task after
  the run itself (the chat sends the next queued message, then titles the conversation);
- `worker_duties`: other queued work a run worker claims beside runs (trigger tests).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from skills_app.core.events import RunFinished


class AfterRun(Protocol):
    """Something to do when a run of the conversation has ended (it may start another run)."""

    def __call__(self, conversation_id: int, finished: RunFinished) -> Awaitable[None]: ...


# Runs a sync function off the event loop (a worker's own database thread).
Database = Callable[..., Awaitable[Any]]


class WorkerDuty(Protocol):
    """Queued work a run worker claims on every tick, beside runs, and gives up (what executes
    in this process) when the worker or the process stops."""

    async def claim_and_start(self, *, worker: str, database: Database | None = None) -> int: ...

    async def give_up_here(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Wiring:
    after_run: tuple[AfterRun, ...] = ()
    worker_duties: tuple[WorkerDuty, ...] = ()


_wiring = Wiring()


def wire(
    *,
    after_run: Sequence[AfterRun] = (),
    worker_duties: Sequence[WorkerDuty] = (),
) -> None:
    """Hand runs what the layers above give them (replacing what was handed before)."""
    global _wiring
    _wiring = Wiring(after_run=tuple(after_run), worker_duties=tuple(worker_duties))


def current() -> Wiring:
    return _wiring


async def claim_and_start(*, worker: str, database: Database | None = None) -> None:
    """Let every worker duty claim and start what it has room for."""
    for duty in _wiring.worker_duties:
        await duty.claim_and_start(worker=worker, database=database)


async def give_up_here() -> None:
    """A worker or the process is stopping: every worker duty gives up what it executes here."""
    for duty in _wiring.worker_duties:
        await duty.give_up_here()
