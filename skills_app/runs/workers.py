"""Channels workers that execute agent runs (RUN_EXECUTOR=worker).

`python manage.py runworker skillscope-runs` starts one. Web processes create the Run row and send
`run.execute` to the `skillscope-runs` channel; one worker takes it, claims the run and executes it
as a task, so a worker runs many runs at once and web processes only relay their events (through
the Redis channel layer, to every web process). A stop from any web process reaches the run
through its worker's own channel (`run.stop`), or, failing that, the `stop_requested` flag the
run's heartbeat polls. Each worker also sweeps runs whose heartbeat went stale (their worker died)
at start-up and then every RUN_HEARTBEAT_SECONDS, marking them interrupted.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from asgiref.sync import sync_to_async
from channels.consumer import AsyncConsumer
from channels.db import database_sync_to_async
from channels.worker import Worker
from django.conf import settings
from django.db import close_old_connections

from skills_app.runs import recovery, tasks
from skills_app.runs import supervisor as runs

logger = logging.getLogger(__name__)


class RunConsumer(AsyncConsumer):
    """Takes `run.execute` from the shared channel and `run.stop` on this worker's own channel."""

    async def run_execute(self, message: dict[str, Any]) -> None:
        try:
            run_id = int(message["run_id"])
            user_id = int(message["user_id"])
        except (KeyError, TypeError, ValueError):
            logger.error("ignoring a malformed run.execute message: %r", message)
            return
        auto_answer = message.get("auto_answer")
        try:
            claimed = await database_sync_to_async(runs.claim_run)(
                run_id, channel=self.channel_name
            )
        except Exception:
            # The handler must not raise: that would end this consumer and its stop channel.
            logger.exception("could not claim run %s", run_id)
            return
        if not claimed:
            logger.info(
                "run %s was stopped, interrupted or taken before this worker got it", run_id
            )
            return
        # Started as a task, never awaited here: this consumer keeps taking messages meanwhile.
        task = runs.spawn_run(
            run_id,
            user_id=user_id,
            auto_answer=auto_answer if isinstance(auto_answer, str) else None,
        )
        tasks.track(run_id, task)
        task.add_done_callback(_log_failure)

    async def run_stop(self, message: dict[str, Any]) -> None:
        try:
            run_id = int(message["run_id"])
        except (KeyError, TypeError, ValueError):
            logger.error("ignoring a malformed run.stop message: %r", message)
            return
        task = tasks.RUNNING.get(run_id)
        if task is not None and not task.done():
            task.cancel()  # execute_run records the stop; the web process waits for the row


def _log_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error("a run task failed", exc_info=task.exception())


async def sweep_stale_runs_forever() -> None:
    """Mark runs with a stale heartbeat interrupted now, then every RUN_HEARTBEAT_SECONDS."""
    while True:
        try:
            # Runs share this process's database thread; a connection broken by a database
            # restart is replaced here instead of failing every run from now on.
            await sync_to_async(close_old_connections)()
            fixed = await recovery.interrupt_stale_runs()
            if fixed:
                logger.warning("marked %s orphaned run(s) as interrupted", fixed)
        except Exception:
            logger.exception("the sweep for orphaned runs failed; trying again later")
        await asyncio.sleep(settings.RUN_HEARTBEAT_SECONDS)


class RunWorker(Worker):
    """Channels' worker plus the sweep for runs orphaned by a worker that died."""

    async def handle(self) -> None:
        sweeper = asyncio.ensure_future(sweep_stale_runs_forever())
        try:
            await super().handle()
        finally:
            sweeper.cancel()
