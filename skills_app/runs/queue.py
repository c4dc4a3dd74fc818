"""The run queue (RUN_EXECUTOR=worker): a run waits as a job (`runs.jobs`) until a worker claims it.

Sending a message stores it and creates its `Run` with status `queued`, in one transaction. The
`run.execute` channel message is only a wake-up, so a worker usually starts a run at once; a lost
wake-up (no worker running, Redis restarted, the worker that got it was full) costs nothing, as
every worker also looks at the queue several times a heartbeat. A run waits however long it takes
for a worker.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from channels.layers import get_channel_layer

from skills_app.models import Run
from skills_app.runs import jobs

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
    fields = ("conversation_id", "started_by_id", "conversation__owner_id", "auto_answer")
    values = (*fields, "started_at")
    taken = jobs.claim(
        jobs.RUNS, worker=worker, limit=limit, job_id=run_id, values=values, channel=channel
    )
    claimed = []
    for job in taken:
        conversation_id, sender, owner, auto_answer, queued_at = job.values
        # A run queued before runs recorded their sender executes as the owner.
        user_id = sender if sender is not None else owner
        claimed.append(
            Claimed(job.pk, conversation_id, user_id, auto_answer or None, queued_at, job.at)
        )
    return claimed


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
