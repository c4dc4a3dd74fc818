"""Ending runs: a stop (here or in another process), waiting for a run and its after-work, and
this process's shutdown (the command line drains; daphne's stop gives its runs up)."""

from __future__ import annotations

import asyncio
import logging
import time

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from skills_app.models import Run, RunEvent
from skills_app.runs import eventlog, jobs, store, tasks, wiring
from skills_app.runs.broadcast import broadcast_events
from skills_app.runs.recovery import interrupt_if_orphaned, interrupt_runs

logger = logging.getLogger(__name__)

# How long a stop waits for a run executing in another process to finish.
STOP_WAIT_SECONDS = 10.0


async def stop_run(run_id: int) -> bool:
    """Stop a run wherever it executes; the partial answer is kept. False when it could not be."""
    task = tasks.cancel(jobs.RUNS, run_id)
    if task is not None:
        group = tasks.group_of(jobs.RUNS, run_id)
        # Until the run has recorded its stop; its after-work (the next queued message) goes on.
        ended = group.executed.wait() if group is not None else asyncio.shield(task)
        try:
            await asyncio.wait_for(ended, timeout=STOP_WAIT_SECONDS)
        except (asyncio.CancelledError, TimeoutError):
            pass
        except Exception:
            logger.exception("run %s raised while stopping", run_id)
        return True
    return await _stop_elsewhere(run_id)


async def _stop_elsewhere(run_id: int) -> bool:
    """Stop a run another process executes: ask it directly and by flag, then wait for the row."""
    run = await Run.objects.filter(pk=run_id, status__in=Run.ACTIVE).afirst()
    if run is None:
        return False
    events = await sync_to_async(_stop_queued)(run_id)
    if not events:
        events = await sync_to_async(interrupt_if_orphaned)(run_id)
    if events:
        await broadcast_events(events)
        return True
    await sync_to_async(jobs.request_stop)(jobs.RUNS, run_id)
    layer = get_channel_layer()
    if run.channel and layer is not None:
        try:
            await layer.send(run.channel, {"type": "run.stop", "run_id": run_id})
        except Exception:
            # The flag still reaches the worker with its next heartbeat.
            logger.exception("could not send the stop of run %s to %s", run_id, run.channel)
    beat = max(settings.RUN_HEARTBEAT_SECONDS, settings.WORKER_HEARTBEAT_SECONDS)
    deadline = time.monotonic() + STOP_WAIT_SECONDS + beat
    while time.monotonic() < deadline:
        if not await Run.objects.filter(pk=run_id, status__in=Run.ACTIVE).aexists():
            return True
        await asyncio.sleep(0.1)
    return False


def _stop_queued(run_id: int) -> list[RunEvent]:
    """Stop a run still waiting for a worker: it never started, so only its status changes."""
    with transaction.atomic():
        # The same conditional update as a claim: of the stop and a worker, exactly one wins.
        stopped = jobs.stop_queued(
            jobs.RUNS,
            run_id,
            error="Stopped by the user.",
            error_kind="stopped",
            finished_at=timezone.now(),
        )
        if not stopped:
            return []
        conversation_id = Run.objects.values_list("conversation_id", flat=True).get(pk=run_id)
        data = {"run_id": run_id, "status": Run.STOPPED, "error": "Stopped by the user."}
        note = store.append_message(conversation_id, store.stop_note(), run_id=run_id)
        return [
            eventlog.append_event(
                conversation_id, "message", eventlog.message_event(note), run_id=run_id
            ),
            eventlog.append_event(
                conversation_id, "run.finished", {**data, "kind": "stopped"}, run_id=run_id
            ),
        ]


async def wait_for_run(run_id: int, timeout: float | None = None) -> None:
    """Wait until the run has finished, here or in another process; TimeoutError after timeout.

    A run executing here is waited for with its after-work (the next queued message started,
    the title written): nothing it started is still writing when this returns.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    if not await _wait_here(run_id, deadline, timeout):
        while await Run.objects.filter(pk=run_id, status__in=Run.ACTIVE).aexists():
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"run {run_id} is still active after {timeout} s")
            await asyncio.sleep(0.05)
        # A worker of this process may have taken it meanwhile: its after-work is here too.
        await _wait_here(run_id, deadline, timeout)


async def _wait_here(run_id: int, deadline: float | None, timeout: float | None) -> bool:
    """Wait for the run's task group if it executes in this process; False if it does not."""
    group = tasks.group_of(jobs.RUNS, run_id)
    if group is None:
        return False
    task = group.task
    left = None if deadline is None else max(0.0, deadline - time.monotonic())
    try:
        await asyncio.wait_for(asyncio.shield(task), timeout=left)
    except asyncio.CancelledError:
        if not task.cancelled():
            raise  # the waiter itself was cancelled
    except TimeoutError:
        raise TimeoutError(f"run {run_id} is still active after {timeout} s") from None
    return True


async def drain() -> None:
    """Wait until every run of this process and its after-work have ended (the command line
    waits so before it exits: a queued message it sent runs to its end, titles are written)."""
    await tasks.drain()


async def shutdown() -> None:
    """Cancel every run of this process and its after-work, and wait until they have ended."""
    await tasks.cancel_all()


async def give_up() -> None:
    """This process is stopping (daphne's shutdown, SIGTERM or Ctrl+C): the runs executing here are
    marked interrupted at once, their kept text with them (Retry works), as a stopping worker
    does, instead of being found still running by the next start's sweep, and so are the other
    jobs executing here (trigger runs, by their own kind: `wiring.give_up_here`); then every job
    and its after-work is cancelled and awaited."""
    ids = tasks.executing_ids(jobs.RUNS)
    try:
        if ids:
            events = await sync_to_async(interrupt_runs)(ids)
            tasks.ABANDONED.update(ids)
            logger.info("process stopping: %d run(s) interrupted", len(ids))
            await broadcast_events(events)
    except Exception:
        logger.exception("process stopping: runs %s not marked interrupted (the sweep will)", ids)
    try:
        await wiring.give_up_here()
    except Exception:
        logger.exception("process stopping: other jobs not marked interrupted (the sweep will)")
    finally:
        await tasks.cancel_all()
