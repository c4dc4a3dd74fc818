"""A worker's heartbeat does not wait for its event loop: a loop lagging seconds behind (a worker
saturated with streams) keeps its worker and runs alive, while a loop stuck for good stops the beat
after a bound, so the worker is still found dead and its runs interrupted."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings as django_settings

from skills_app.models import Conversation, Run, Worker
from skills_app.runs import heartbeat, jobs, liveness
from skills_app.runs import supervisor as runs
from tests.support.worker_helpers import (
    after_ticks,
    paused,
    running_worker,
    status,
    until,
    wait_event,
)

pytestmark = pytest.mark.django_db(transaction=True)


def _block_the_loop(
    seconds: float, heart: heartbeat.Heart, run_id: int
) -> tuple[int, bool, list[str], bool]:
    """Block the calling event loop (the worker's: it runs in the test's loop) for `seconds`, then,
    while it is still blocked, sweep as another process would. Returns the beats the heart wrote
    meanwhile, whether it judged the loop stuck, which workers the sweep buried, and whether the
    run counts as orphaned (another process would interrupt it)."""
    before = heart.beats
    time.sleep(seconds)
    stuck = heart.loop_stuck
    # Another process's sweep, from a thread of its own (this thread is an event loop's).
    with ThreadPoolExecutor(max_workers=1) as other:
        buried, orphaned = other.submit(
            heartbeat.in_database_thread, lambda: _sweep(run_id)
        ).result()
    return heart.beats - before, stuck, buried, orphaned


def _sweep(run_id: int) -> tuple[list[str], bool]:
    buried = liveness.bury_dead_workers()
    # What another process's `recovery.sweep` would interrupt (this one skips runs executing here).
    return buried, Run.objects.filter(jobs.orphaned(jobs.RUNS), pk=run_id).exists()


async def test_a_worker_whose_loop_lags_is_not_taken_for_dead(worker_fake, layer, alice):
    """Blocked for twice the stale time: the heart beats on, for the worker and for its run."""
    conversation = await Conversation.objects.acreate(owner=alice)
    reply, gate, reached = paused("Still streaming, just slowly. " * 4)
    worker_fake.enqueue(reply)
    async with running_worker() as worker:
        try:
            run = await runs.start_run(conversation.pk, "talk", user_id=alice.pk)
            await wait_event(reached)
            name = worker.loop.name
            beats, stuck, buried, orphaned = _block_the_loop(
                django_settings.WORKER_STALE_SECONDS * 2, worker.loop.heart, run.pk
            )
            assert beats >= 3 and not stuck
            assert buried == [] and not orphaned
            assert await sync_to_async(status)(run.pk) == Run.RUNNING
            await after_ticks(worker, 2)  # the loop caught up with the beats it was handed
            assert worker.loop.name == name
            assert (await Worker.objects.aget(name=name)).stopped_at is None
        finally:
            gate.set()
        await runs.wait_for_run(run.pk, timeout=10)
        assert await sync_to_async(status)(run.pk) == Run.DONE


async def test_a_worker_whose_loop_is_stuck_is_found_dead_after_the_bound(
    worker_fake, layer, alice
):
    """Past LOOP_STUCK_FACTOR stale periods without an answer from the loop the heart stops, so a
    deadlocked worker's runs are not held forever; once the loop is back the worker starts over."""
    conversation = await Conversation.objects.acreate(owner=alice)
    reply, gate, reached = paused("Words nobody will see. " * 4)
    worker_fake.enqueue(reply)
    async with running_worker() as worker:
        try:
            run = await runs.start_run(conversation.pk, "talk", user_id=alice.pk)
            await wait_event(reached)
            name = worker.loop.name
            stale = django_settings.WORKER_STALE_SECONDS
            _, stuck, buried, orphaned = _block_the_loop(
                stale * (heartbeat.LOOP_STUCK_FACTOR + 2), worker.loop.heart, run.pk
            )
            assert stuck
            assert buried == [name] and orphaned
            # The loop answers again: the next beat tells it it was buried; it gives up its run
            # and starts over under a new name.
            await until(lambda: status(run.pk) == Run.INTERRUPTED)
        finally:
            gate.set()
        await until(lambda: worker.loop.name != name and worker.loop._registered)
        assert not worker.loop.heart.loop_stuck


async def test_the_heart_stops_with_its_worker(worker_fake, layer):
    async with running_worker() as worker:
        heart = worker.loop.heart
        first = heart.beats
        await until(lambda: heart.beats > first)
        assert heart.is_alive()
    assert not heart.is_alive()
    name = worker.loop.name
    assert (await Worker.objects.aget(name=name)).stop_reason == "shut down"
