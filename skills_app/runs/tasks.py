"""The runs this process executes: one table shared by the supervisor, recovery and the worker.

Each run executes in one task, its task group: first the run itself, then its after-work (the
`RunFinished` subscribers: the next queued message, the title). Nothing a run starts is left
detached: `wait_for_run` awaits the whole group, `drain` every group of the process (the
command line before it exits), and a worker that gives up a run cancels its group.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

# run id -> the task executing it here, while the run itself executes (a stop, a heartbeat or a
# worker cancels it). Its after-work is not listed: a late stop must not cancel a run's follow-ups.
RUNNING: dict[int, asyncio.Task[Any]] = {}
# Runs executing here that another process already marked interrupted (their heartbeat looked
# dead): their history is closed, so whatever they still produce is dropped, not stored.
ABANDONED: set[int] = set()


@dataclass(slots=True)
class RunGroup:
    """One run's task (the run, then its after-work) and the moment the run itself ended."""

    task: asyncio.Task[Any]
    executed: asyncio.Event = field(default_factory=asyncio.Event)


# run id -> its group, until the run and its after-work are over.
GROUPS: dict[int, RunGroup] = {}


def track(run_id: int, task: asyncio.Task[Any]) -> None:
    """Remember a run executing here until its task ends."""
    RUNNING[run_id] = task
    task.add_done_callback(lambda _t: RUNNING.pop(run_id, None))


def open_group(run_id: int, task: asyncio.Task[Any]) -> RunGroup:
    """List a run's task group from its start to the end of its after-work."""
    group = GROUPS[run_id] = RunGroup(task)
    track(run_id, task)

    def closed(_task: asyncio.Task[Any]) -> None:
        group.executed.set()
        if GROUPS.get(run_id) is group:
            del GROUPS[run_id]

    task.add_done_callback(closed)
    return group


def executed(run_id: int) -> None:
    """The run itself has ended (its after-work may follow): a stop has nothing left to cancel."""
    group = GROUPS.get(run_id)
    if group is not None:
        group.executed.set()
        if RUNNING.get(run_id) is group.task:
            del RUNNING[run_id]


def executing_here(run_id: int) -> bool:
    task = RUNNING.get(run_id)
    return task is not None and not task.done()


async def drain() -> None:
    """Wait until no run of this process executes or has after-work left (it may start runs)."""
    while GROUPS:
        await asyncio.gather(
            *(asyncio.shield(group.task) for group in list(GROUPS.values())),
            return_exceptions=True,
        )


async def cancel_all() -> None:
    """Cancel every run group of this process and wait for them to end (a shutdown)."""
    groups = list(GROUPS.values())
    for group in groups:
        group.task.cancel()
    await asyncio.gather(*(group.task for group in groups), return_exceptions=True)
