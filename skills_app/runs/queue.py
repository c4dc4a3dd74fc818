"""The run queue (RUN_EXECUTOR=worker): a run waits as a database row until a worker claims it.

Sending a message stores it and creates its `Run` with status `queued`, in one transaction. A
worker claims queued runs oldest first, with `SELECT ... FOR UPDATE SKIP LOCKED` on PostgreSQL
(workers never wait on each other's rows) and, on every database, a conditional UPDATE from
`queued` to `running` that only one claimer can win. The `run.execute` channel message is only a
wake-up, so a worker usually starts a run at once; a lost wake-up (no worker running, Redis
restarted, the worker that got it was full) costs nothing, as every worker also looks at the
queue several times a heartbeat. A run waits however long it takes for a worker.

Why a database row rather than Redis Streams with acknowledgement: the run, the user's message
and the queue entry are then one row written in one transaction, so they can never disagree (a
stream entry would be a second write that can be lost between the two, or outlive its run);
PostgreSQL is already the store that must not lose data and is backed up, while Redis here is a
cache-like relay that may run without persistence (its channel messages expire after a minute);
and stopping a queued run is the same conditional update as claiming it, so exactly one wins. The
cost, a few cheap indexed queries per worker per second, is small next to a run's own writes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from channels.layers import get_channel_layer
from django.db import transaction
from django.utils import timezone

from skills_app.models import Run

logger = logging.getLogger(__name__)

# The channel Channels workers listen on (`manage.py runworker skillscope-runs`) for wake-ups.
RUN_CHANNEL = "skillscope-runs"


@dataclass(frozen=True, slots=True)
class Claimed:
    """A run a worker took: what it needs to execute it and to log the wait."""

    run_id: int
    conversation_id: int
    user_id: int
    auto_answer: str | None
    queued_at: datetime
    claimed_at: datetime

    @property
    def waited(self) -> float:
        return (self.claimed_at - self.queued_at).total_seconds()


def claim(*, worker: str, channel: str, limit: int, run_id: int | None = None) -> list[Claimed]:
    """Take up to `limit` queued runs, oldest first (or only `run_id`), for this worker."""
    if limit <= 0:
        return []
    with transaction.atomic():
        queued = Run.objects.filter(status=Run.QUEUED)
        if run_id is not None:
            queued = queued.filter(pk=run_id)
        # SKIP LOCKED (PostgreSQL): rows another worker is claiming right now are passed over.
        # Other databases ignore the lock; the conditional update below decides there.
        fields = ("pk", "conversation_id", "started_by_id", "conversation__owner_id")
        candidates = list(
            queued.select_for_update(skip_locked=True, of=("self",))
            .order_by("pk")
            .values_list(*fields, "auto_answer", "started_at")[:limit]
        )
        now = timezone.now()
        taken = []
        for pk, conversation_id, sender, owner, auto_answer, queued_at in candidates:
            won = Run.objects.filter(pk=pk, status=Run.QUEUED).update(
                status=Run.RUNNING, worker=worker, channel=channel, heartbeat_at=now, claimed_at=now
            )
            if won:
                # A run queued before runs recorded their sender executes as the owner.
                user_id = sender if sender is not None else owner
                taken.append(
                    Claimed(pk, conversation_id, user_id, auto_answer or None, queued_at, now)
                )
        return taken


def fair_share(executing_here: int) -> int:
    """How many queued runs a worker executing `executing_here` runs should take now.

    Its share of all the work (queued plus executing) among the live workers, less what it
    already executes: the least busy worker takes new runs first, and a burst spreads over all
    of them instead of going to whichever worker woke first. (The least busy worker's share is
    never 0 while runs are queued, so nothing is left waiting.)
    """
    from skills_app.runs.liveness import live_worker_names

    queued = Run.objects.filter(status=Run.QUEUED).count()
    if not queued:
        return 0
    live = live_worker_names()
    executing = Run.objects.filter(status__in=Run.EXECUTING, worker__in=live).count()
    target = -(-(queued + executing) // max(1, len(live)))
    return min(queued, max(0, target - executing_here))


async def wake_workers(run_id: int) -> None:
    """Tell a worker a run is queued. Best effort: workers find it in the queue anyway."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        await layer.send(RUN_CHANNEL, {"type": "run.execute", "run_id": run_id})
    except Exception:
        logger.warning(
            "could not send the wake-up for run %s; a worker takes it from the queue",
            run_id,
            exc_info=True,
        )
