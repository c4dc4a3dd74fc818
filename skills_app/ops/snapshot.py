"""What the operator page shows: workers, the queue, runs in flight and the event rate, read cheaply.

Every figure is one small query: the worker table is tiny, unfinished runs are found through the
status index, and the event rate reads only the newest rows of the event log (by primary key,
which grows with time), never the whole log.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, Max, Min, Q
from django.utils import timezone

from skills_app.models import Run, RunEvent, Worker

# The event rate is measured over this window...
RATE_WINDOW = timedelta(seconds=60)
# ...reading at most this many of the newest events (more in a minute shows as "at least").
RATE_ROWS = 200_000
# Ended workers stay on the page this long.
SHOW_ENDED = timedelta(hours=1)
# Queue waits of the runs claimed in this window.
WAIT_WINDOW = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class WorkerRow:
    name: str
    started_at: datetime
    heartbeat_age: float
    alive: bool
    capacity: int
    executing: int
    stopped_at: datetime | None
    stop_reason: str


@dataclass(frozen=True, slots=True)
class Snapshot:
    taken_at: datetime
    executor: str
    workers: list[WorkerRow]
    queued: int
    running: int
    waiting: int
    oldest_queued_age: float | None
    text_events_per_second: float
    events_per_second: float
    rate_capped: bool
    waits_claimed: int
    wait_median: float | None
    wait_max: float | None

    @property
    def live_workers(self) -> int:
        return sum(1 for w in self.workers if w.alive)


def take() -> Snapshot:
    """The figures as of now."""
    now = timezone.now()
    queued, running, waiting, oldest = _runs(now)
    text_rate, event_rate, capped = _event_rate(now)
    waits = _queue_waits(now)
    return Snapshot(
        taken_at=now,
        executor=settings.RUN_EXECUTOR,
        workers=_workers(now),
        queued=queued,
        running=running,
        waiting=waiting,
        oldest_queued_age=oldest,
        text_events_per_second=text_rate,
        events_per_second=event_rate,
        rate_capped=capped,
        waits_claimed=len(waits),
        wait_median=statistics.median(waits) if waits else None,
        wait_max=max(waits) if waits else None,
    )


def _workers(now: datetime) -> list[WorkerRow]:
    stale_before = now - timedelta(seconds=settings.WORKER_STALE_SECONDS)
    rows = Worker.objects.filter(
        Q(stopped_at__isnull=True) | Q(stopped_at__gte=now - SHOW_ENDED)
    ).order_by("stopped_at", "started_at")
    executing = dict(
        Run.objects.filter(status__in=Run.EXECUTING)
        .values("worker")
        .annotate(n=Count("pk"))
        .values_list("worker", "n")
    )
    return [
        WorkerRow(
            name=w.name,
            started_at=w.started_at,
            heartbeat_age=(now - w.heartbeat_at).total_seconds(),
            alive=w.stopped_at is None and w.heartbeat_at >= stale_before,
            capacity=w.capacity,
            executing=executing.get(w.name, 0),
            stopped_at=w.stopped_at,
            stop_reason=w.stop_reason or ("no heartbeat" if w.heartbeat_at < stale_before else ""),
        )
        for w in rows
    ]


def _runs(now: datetime) -> tuple[int, int, int, float | None]:
    """Top-level runs queued, running and waiting for an approval; the oldest queued one's age."""
    counts = dict(
        Run.objects.filter(status__in=Run.ACTIVE, parent__isnull=True)
        .values("status")
        .annotate(n=Count("pk"))
        .values_list("status", "n")
    )
    oldest = Run.objects.filter(status=Run.QUEUED).aggregate(t=Min("started_at"))["t"]
    return (
        counts.get(Run.QUEUED, 0),
        counts.get(Run.RUNNING, 0),
        counts.get(Run.WAITING, 0),
        (now - oldest).total_seconds() if oldest else None,
    )


def _event_rate(now: datetime) -> tuple[float, float, bool]:
    """Text events and all events stored per second over the last minute; whether capped."""
    newest = RunEvent.objects.aggregate(m=Max("pk"))["m"] or 0
    recent = RunEvent.objects.filter(pk__gt=newest - RATE_ROWS, created_at__gte=now - RATE_WINDOW)
    counts = recent.aggregate(all=Count("pk"), text=Count("pk", filter=Q(type="text.delta")))
    seconds = RATE_WINDOW.total_seconds()
    return counts["text"] / seconds, counts["all"] / seconds, counts["all"] >= RATE_ROWS


def _queue_waits(now: datetime) -> list[float]:
    """Seconds each run claimed in the last hour waited in the queue."""
    claimed = Run.objects.filter(claimed_at__gte=now - WAIT_WINDOW).values_list(
        "started_at", "claimed_at"
    )
    return [(c - s).total_seconds() for s, c in claimed[:10_000] if c is not None]
