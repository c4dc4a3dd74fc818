"""Jobs: the one queue agent runs (`Run`) and trigger runs (`TriggerRun`) both wait in.

A job is a row with a `status`, the process executing it (`worker`), a `heartbeat_at` and a
`stop_requested` flag. What every kind of job goes through is written here once:

- claim: queued rows oldest first, `SELECT ... FOR UPDATE SKIP LOCKED` on PostgreSQL (claimers
  never wait on each other's rows) and, on every database, a conditional UPDATE from `queued` to
  `running` that only one claimer can win;
- stop of a queued job: the same conditional update, so of a stop and a claim exactly one wins;
- heartbeat: touch the executing jobs' `heartbeat_at` and read back each one's status and stop
  flag (`beat`), for all the jobs of one event loop at once (`Heartbeats`), or from a worker's
  own heartbeat thread (`runs.heartbeat`);
- stale recovery: a job whose worker died or whose heartbeat is older than RUN_STALE_SECONDS is
  orphaned (`orphaned`); its kind decides what marking it interrupted involves.

What a kind does with a job it claimed is its own (`runs.execute`, `triggers.executor`); the
tasks executing jobs of every kind in this process are one table (`runs.tasks`).

Why a database row rather than Redis Streams with acknowledgement: the job and what it is for (the
user's message, a trigger run's result rows) are then written in one transaction and can never
disagree; PostgreSQL is already the store that must not lose data, while Redis here is a relay
that may run without persistence; and stopping a queued job is the same conditional update as
claiming it. The cost, a few cheap indexed queries per worker per second, is small next to a
job's own writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import models, transaction
from django.db.models import Q
from django.utils import timezone

from skills_app.models import Run
from skills_app.runs import liveness

logger = logging.getLogger(__name__)

# The statuses a claim and a stop move between; every kind's `Status` uses these values.
QUEUED = "queued"
RUNNING = "running"
STOPPED = "stopped"


@dataclass(frozen=True, slots=True)
class Kind:
    """One kind of job: its rows, the statuses it is active and executing in, and the field a
    claim stamps with the moment it was taken."""

    name: str
    rows: models.Manager[Any]
    active: tuple[str, ...]
    executing: tuple[str, ...]
    claimed_field: str


RUNS = Kind(
    "run", Run.objects, active=Run.ACTIVE, executing=Run.EXECUTING, claimed_field="claimed_at"
)


@dataclass(frozen=True, slots=True)
class Taken:
    """A job a claim won: its id, the `values` asked for, and when it was taken."""

    pk: int
    values: tuple[Any, ...]
    at: datetime


def claim(
    kind: Kind,
    *,
    worker: str,
    limit: int,
    job_id: int | None = None,
    values: tuple[str, ...] = (),
    **stamp: Any,
) -> list[Taken]:
    """Take up to `limit` queued jobs, oldest first (or only `job_id`), for `worker`.

    `values`: fields read with each candidate (joins allowed); `stamp`: more fields to set.
    """
    if limit <= 0:
        return []
    with transaction.atomic():
        queued = kind.rows.filter(status=QUEUED)
        if job_id is not None:
            queued = queued.filter(pk=job_id)
        # SKIP LOCKED (PostgreSQL): rows another claimer holds right now are passed over. Other
        # databases ignore the lock; the conditional update below decides there.
        candidates = list(
            queued.select_for_update(skip_locked=True, of=("self",))
            .order_by("pk")
            .values_list("pk", *values)[:limit]
        )
        now = timezone.now()
        changes = {
            "status": RUNNING,
            "worker": worker,
            "heartbeat_at": now,
            kind.claimed_field: now,
            **stamp,
        }
        return [
            Taken(row[0], tuple(row[1:]), now)
            for row in candidates
            if kind.rows.filter(pk=row[0], status=QUEUED).update(**changes)
        ]


def stop_queued(kind: Kind, job_id: int, **changes: Any) -> bool:
    """Stop a job no process has claimed; False when a claim (or an earlier stop) won."""
    return bool(kind.rows.filter(pk=job_id, status=QUEUED).update(status=STOPPED, **changes))


def request_stop(kind: Kind, job_id: int) -> None:
    """Ask the process executing a job to stop it (its next heartbeat reads the flag)."""
    kind.rows.filter(pk=job_id, status__in=kind.active).update(stop_requested=True)


def beat(kind: Kind, job_ids: Iterable[int], *, touch: bool = True) -> dict[int, tuple[str, bool]]:
    """Touch the heartbeats of these jobs (unless `touch` is False); each one's status and stop
    flag (a job absent from the answer is gone)."""
    ids = list(job_ids)
    if not ids:
        return {}
    if touch:
        kind.rows.filter(pk__in=ids, status__in=kind.executing).update(heartbeat_at=timezone.now())
    rows = kind.rows.filter(pk__in=ids).values_list("pk", "status", "stop_requested")
    return {pk: (status, stop) for pk, status, stop in rows}


def orphaned(kind: Kind, *, trusted_for: float = math.inf) -> Q:
    """Jobs taken by a process that is gone: a dead worker, or a heartbeat older than allowed.

    `trusted_for`: how long the caller has reached the database without a break; a silence it
    could not have told from its own outage counts only once that covers the stale period
    (`database_thread.Continuity`). A worker that said goodbye, or was buried, is gone either way. A
    queued job is never orphaned: it waits for a worker however long.
    """
    gone = Q(worker__in=liveness.dead_worker_names(trusted_for=trusted_for))
    if trusted_for >= float(settings.RUN_STALE_SECONDS):
        gone |= Q(heartbeat_at__lt=timezone.now() - timedelta(seconds=settings.RUN_STALE_SECONDS))
    return Q(status__in=kind.executing) & gone


# Acts on a job's row as a heartbeat read it (status None: gone); False once nothing is left to
# keep alive.
Follow = Callable[[int, "asyncio.Task[Any]", "str | None", bool], bool]


class Heartbeats:
    """The heartbeats of every job of one kind executing on this event loop: one UPDATE and one
    SELECT a beat, whatever their number.

    A job is beaten at once when it starts (with every other, which costs nothing more), then
    every RUN_HEARTBEAT_SECONDS; what a beat reads of each job is handed to `follow` (a stop asked
    from another process, the job ended or marked interrupted elsewhere).
    """

    def __init__(self, kind: Kind, loop: asyncio.AbstractEventLoop, follow: Follow) -> None:
        self.kind = kind
        self.loop = loop
        self.follow = follow
        self._jobs: dict[int, asyncio.Task[Any]] = {}
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.beats = 0  # beats so far, each one UPDATE and one SELECT (tests, benchmarks)

    def add(self, job_id: int, task: asyncio.Task[Any]) -> None:
        self._jobs[job_id] = task
        self._changed.set()
        if self._task is None or self._task.done():
            # A context of its own, as the jobs have: it outlives whoever started the first one.
            self._task = self.loop.create_task(
                self._beat_while_jobs(), context=contextvars.Context()
            )

    def idle(self) -> bool:
        """True when no job is beaten and the beating task has ended."""
        return not self._jobs and (self._task is None or self._task.done())

    def discard(self, job_id: int) -> None:
        if self._jobs.pop(job_id, None) is not None and not self._jobs:
            self._changed.set()  # the beating task ends now rather than after its sleep

    async def _beat_while_jobs(self) -> None:
        while self._jobs:
            self._changed.clear()
            beaten = dict(self._jobs)
            try:
                found = await sync_to_async(beat)(self.kind, list(beaten))
            except Exception:
                # A database hiccup must not kill a live job; the next beat tries again.
                logger.exception("heartbeat of %ss %s failed", self.kind.name, sorted(beaten))
            else:
                self.beats += 1
                for job_id, task in beaten.items():
                    status, stop = found.get(job_id, (None, False))
                    if self._jobs.get(job_id) is task and not self.follow(
                        job_id, task, status, stop
                    ):
                        del self._jobs[job_id]
            if self._jobs and not self._changed.is_set():
                # Woken early by a job starting (its first beat now) or the last one ending.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), settings.RUN_HEARTBEAT_SECONDS)


_HEARTBEATS: dict[Kind, Heartbeats] = {}


def heartbeats(kind: Kind, follow: Follow) -> Heartbeats:
    """This event loop's heartbeats of one kind of job (tests run a loop each; a server one)."""
    loop = asyncio.get_running_loop()
    current = _HEARTBEATS.get(kind)
    if current is None or current.loop is not loop:
        current = _HEARTBEATS[kind] = Heartbeats(kind, loop, follow)
    return current
