"""The jobs this process executes, of every kind (`runs.jobs`: agent runs and trigger runs): one
table, shared by the supervisor, the worker, recovery, ending and the trigger executor.

Each job executes in one task, its task group: first the job itself, then its after-work (an
agent run's `RunFinished` subscribers: the next queued message, the title; a trigger run has
none). Nothing a job starts is left detached: `wait_for_run` awaits the whole group, `drain`
every group of the process (the command line before it exits), and a process or worker that
gives its jobs up cancels their groups. A stop cancels the job itself (`cancel`), never its
after-work.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from skills_app.runs.jobs import Kind

# (kind, job id): one job.
Key = tuple["Kind", int]


@dataclass(slots=True)
class JobGroup:
    """One job's task (the job, then its after-work) and the moment the job itself ended."""

    task: asyncio.Task[Any]
    executed: asyncio.Event = field(default_factory=asyncio.Event)


# Every job's group, until the job and its after-work are over.
_groups: dict[Key, JobGroup] = {}
# The task of each job while the job itself executes here (a stop, a heartbeat or a worker
# cancels it). Its after-work is not listed: a late stop must not cancel a run's follow-ups.
_executing: dict[Key, asyncio.Task[Any]] = {}
# Agent runs executing here that another process already marked interrupted (their heartbeat
# looked dead): their history is closed, so whatever they still produce is dropped, not stored.
ABANDONED: set[int] = set()


def open_group(kind: Kind, job_id: int, task: asyncio.Task[Any]) -> JobGroup:
    """List a job's task group from its start to the end of its after-work."""
    key = (kind, job_id)
    group = _groups[key] = JobGroup(task)
    _executing[key] = task

    def closed(_task: asyncio.Task[Any]) -> None:
        group.executed.set()
        if _executing.get(key) is task:
            del _executing[key]
        if _groups.get(key) is group:
            del _groups[key]

    task.add_done_callback(closed)
    return group


def executed(kind: Kind, job_id: int) -> None:
    """The job itself has ended (its after-work may follow): a stop has nothing left to cancel."""
    key = (kind, job_id)
    group = _groups.get(key)
    if group is not None:
        group.executed.set()
        if _executing.get(key) is group.task:
            del _executing[key]


def group_of(kind: Kind, job_id: int) -> JobGroup | None:
    """The job's group while it or its after-work runs in this process."""
    return _groups.get((kind, job_id))


def executing(kind: Kind, job_id: int) -> asyncio.Task[Any] | None:
    """The task of the job while the job itself executes in this process."""
    task = _executing.get((kind, job_id))
    return task if task is not None and not task.done() else None


def executing_here(kind: Kind, job_id: int) -> bool:
    return executing(kind, job_id) is not None


def executing_ids(kind: Kind) -> list[int]:
    """The jobs of a kind executing in this process, in the order they started."""
    return [
        job_id for (k, job_id), task in list(_executing.items()) if k == kind and not task.done()
    ]


def cancel(kind: Kind, job_id: int) -> asyncio.Task[Any] | None:
    """Cancel the job if it executes here (its after-work goes on); its task, or None."""
    task = executing(kind, job_id)
    if task is not None:
        task.cancel()
    return task


async def cancel_jobs(kind: Kind, job_ids: list[int]) -> None:
    """Cancel these jobs of a kind executing here, and wait for them to end."""
    found = [task for job_id in job_ids if (task := cancel(kind, job_id)) is not None]
    await asyncio.gather(*found, return_exceptions=True)


async def drain() -> None:
    """Wait until no job of this process executes or has after-work left (it may start jobs)."""
    while _groups:
        await asyncio.gather(
            *(asyncio.shield(group.task) for group in list(_groups.values())),
            return_exceptions=True,
        )


async def cancel_all() -> None:
    """Cancel every job group of this process and wait for them to end (a shutdown)."""
    groups = list(_groups.values())
    for group in groups:
        group.task.cancel()
    await asyncio.gather(*(group.task for group in groups), return_exceptions=True)
