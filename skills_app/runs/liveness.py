"""Which workers are alive: the registry of run workers and their heartbeats.

Every `runworker skillscope-runs` process registers a `Worker` row when it starts and touches its
`heartbeat_at` every WORKER_HEARTBEAT_SECONDS, together with the heartbeat of every run it
executes (one statement for all of them). A worker silent for WORKER_STALE_SECONDS is dead:
`bury_dead_workers` marks it stopped, and `recovery` interrupts its runs.

A heartbeat missed because the database was away is not a death. Every process's clock runs on
while the database is away, but no heartbeat can be written meanwhile: a sweeper that has just
regained the database would find every worker silent and bury them all. So a sweeper judges
silence only once it has itself reached the database without a break for WORKER_STALE_SECONDS
(`database_thread.Continuity`): a live worker beats within WORKER_HEARTBEAT_SECONDS of the database's return,
and only a worker that still has not beaten by then is taken for dead. A database that is away
for one process only (a network split) makes that process's workers silent for the others, who
bury them: such a worker finds itself taken for dead when it is back, and gives up its runs.

The heartbeat must not wait behind the run's own database work: under load a worker's shared
database thread can be seconds behind, and a late heartbeat looks like a dead worker. So the
liveness work runs in a `database_thread.DatabaseThread` of its own, with its own connection, and the beat itself
in a thread with a clock of its own (`heartbeat.Heart`): under load the worker's event loop can be
seconds late too.
"""

from __future__ import annotations

import math
import os
import secrets
import socket
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from skills_app.models import Worker

# How long the rows of ended workers stay for the operator page.
KEEP_ENDED_WORKERS = timedelta(days=1)


def process_identity() -> str:
    """How this process is named in `Run.worker` for runs it executes inline: host and pid."""
    return f"{socket.gethostname()} pid {os.getpid()}"


def new_worker_name() -> str:
    """A name for one start of a worker: host, pid and a random tag (pids repeat; starts don't)."""
    return f"{process_identity()} #{secrets.token_hex(3)}"


def sweep_interval() -> float:
    """How often workers and web processes look for dead workers (a quarter of a heartbeat)."""
    return float(settings.WORKER_HEARTBEAT_SECONDS) / 4


def _stale_before(now: datetime) -> datetime:
    return now - timedelta(seconds=settings.WORKER_STALE_SECONDS)


def register(name: str, channel: str, capacity: int) -> None:
    now = timezone.now()
    Worker.objects.create(
        name=name, channel=channel, capacity=capacity, started_at=now, heartbeat_at=now
    )


@dataclass(frozen=True, slots=True)
class Beat:
    """What one heartbeat learned: is this worker still registered, and its runs' state."""

    alive: bool
    # run id -> (status, stop requested) for the runs the worker executes.
    runs: dict[int, tuple[str, bool]]


def touch(name: str) -> bool:
    """Touch this worker's heartbeat; False when others took it for dead (it is not registered)."""
    return bool(
        Worker.objects.filter(name=name, stopped_at__isnull=True).update(
            heartbeat_at=timezone.now()
        )
    )


def deregister(name: str, reason: str = "shut down") -> None:
    Worker.objects.filter(name=name, stopped_at__isnull=True).update(
        stopped_at=timezone.now(), stop_reason=reason
    )


def bury_dead_workers(*, trusted_for: float = math.inf) -> list[str]:
    """Mark workers silent for WORKER_STALE_SECONDS as stopped; the names this call marked.

    `trusted_for`: how long the caller has reached the database without a break (a sweeper's
    `Continuity`); nobody is buried before that covers a whole stale period, as a silence that
    began while the database was away says nothing about the worker. One-off callers (tests,
    `manage.py bootstrap`) keep the default.
    """
    if trusted_for < float(settings.WORKER_STALE_SECONDS):
        return []
    now = timezone.now()
    stale = list(
        Worker.objects.filter(
            stopped_at__isnull=True, heartbeat_at__lt=_stale_before(now)
        ).values_list("name", flat=True)
    )
    buried = []
    for name in stale:
        # Conditional: of several sweepers, one marks (and logs) each dead worker.
        if Worker.objects.filter(
            name=name, stopped_at__isnull=True, heartbeat_at__lt=_stale_before(now)
        ).update(stopped_at=now, stop_reason="no heartbeat"):
            buried.append(name)
    return buried


def dead_worker_names(*, trusted_for: float = math.inf) -> Any:
    """A subquery of the names of ended workers: stopped, or silent past WORKER_STALE_SECONDS
    (the latter only for a caller that has reached the database long enough to tell)."""
    from django.db.models import Q

    ended = Q(stopped_at__isnull=False)
    if trusted_for >= float(settings.WORKER_STALE_SECONDS):
        ended |= Q(heartbeat_at__lt=_stale_before(timezone.now()))
    return Worker.objects.filter(ended).values("name")


def _live() -> Any:
    return Worker.objects.filter(
        stopped_at__isnull=True, heartbeat_at__gte=_stale_before(timezone.now())
    )


def live_workers() -> int:
    """How many workers are registered and beating."""
    return int(_live().count())


def live_worker_names() -> list[str]:
    return list(_live().values_list("name", flat=True))


def forget_old_workers() -> int:
    """Delete the rows of workers that ended more than a day ago."""
    cutoff = timezone.now() - KEEP_ENDED_WORKERS
    deleted, _ = Worker.objects.filter(stopped_at__lt=cutoff).delete()
    return deleted
