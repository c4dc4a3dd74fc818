"""A run owns what it starts: its after-work (the subscribers to its end) runs in the run's own
task group, which `wait_for_run` and `drain` await and a shutdown cancels; a stop waits only for
the run itself; runs reach the chat only through what the entry point handed them."""

from __future__ import annotations

import asyncio

import pytest

from skills_app.core.events import RunFinished
from skills_app.models import Conversation, Run, RunEvent
from skills_app.runs import supervisor as runs
from skills_app.runs import tasks, wiring
from skills_app.runs.jobs import RUNS
from tests.support.loop_helpers import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("demo_model")]


@pytest.fixture
def conversation(alice):
    return Conversation.objects.create(owner=alice, title="lifecycle")


class Subscriber:
    """A subscriber to runs' ends that holds each run's after-work until it is released."""

    def __init__(self) -> None:
        self.called: list[tuple[int, RunFinished]] = []
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.outcome: str | None = None

    async def __call__(self, conversation_id: int, finished: RunFinished) -> None:
        self.called.append((conversation_id, finished))
        self.entered.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.outcome = "cancelled"
            raise
        self.outcome = "finished"


@pytest.fixture
def subscriber():
    """Only this subscriber to runs' ends (the chat's are put back afterwards)."""
    before = wiring.current()
    held = Subscriber()
    wiring.wire(after_run=[held], worker_duties=before.worker_duties)
    try:
        yield held
    finally:
        wiring.wire(after_run=before.after_run, worker_duties=before.worker_duties)


async def test_subscribers_hear_the_end_of_a_run_with_its_status(conversation, alice, subscriber):
    subscriber.release.set()
    run = await runs.start_run(conversation.pk, "hello", user_id=alice.pk)
    await runs.wait_for_run(run.pk, timeout=30)
    assert subscriber.called == [
        (conversation.pk, RunFinished(run_id=run.pk, status=Run.DONE, error="", kind=""))
    ]
    assert subscriber.outcome == "finished"


async def test_waiting_for_a_run_waits_for_its_after_work(conversation, alice, subscriber):
    run = await runs.start_run(conversation.pk, "hello", user_id=alice.pk)
    waiting = asyncio.ensure_future(runs.wait_for_run(run.pk, timeout=30))
    await asyncio.wait_for(subscriber.entered.wait(), 30)
    # The run itself is over and its row says so; its after-work is still going.
    assert (await Run.objects.aget(pk=run.pk)).status == Run.DONE
    assert not waiting.done() and tasks.group_of(RUNS, run.pk) is not None
    assert not tasks.executing_here(RUNS, run.pk)
    subscriber.release.set()
    await waiting
    assert subscriber.outcome == "finished" and tasks.group_of(RUNS, run.pk) is None


async def test_drain_waits_for_every_run_of_the_process(conversation, alice, subscriber):
    run = await runs.start_run(conversation.pk, "hello", user_id=alice.pk)
    draining = asyncio.ensure_future(runs.drain())
    await asyncio.wait_for(subscriber.entered.wait(), 30)
    assert not draining.done()
    subscriber.release.set()
    await asyncio.wait_for(draining, 30)
    assert tasks.group_of(RUNS, run.pk) is None and not tasks.executing_ids(RUNS)


async def test_a_late_stop_does_not_cancel_the_after_work(conversation, alice, subscriber):
    run = await runs.start_run(conversation.pk, "hello", user_id=alice.pk)
    await asyncio.wait_for(subscriber.entered.wait(), 30)
    # The run has ended: nothing is left to stop (and the follow-ups go on).
    assert await runs.stop_run(run.pk) is False
    subscriber.release.set()
    await runs.wait_for_run(run.pk, timeout=30)
    assert subscriber.outcome == "finished"


async def test_a_stop_returns_without_waiting_for_the_after_work(
    settings, conversation, alice, subscriber
):
    settings.MODEL_CLIENT = "skills_app.runs.client.default_client"
    settings.DEMO_MODEL_DELAY = 0.05  # a demo answer slow enough to be stopped midway
    run = await runs.start_run(conversation.pk, "hello there", user_id=alice.pk)
    started = RunEvent.objects.filter(run_id=run.pk, type="run.started")
    await wait_until(started.aexists, what="the run's start")
    assert await runs.stop_run(run.pk)
    # The stop returned while the after-work is held: it waited for the run only.
    assert (await Run.objects.aget(pk=run.pk)).status == Run.STOPPED
    await asyncio.wait_for(subscriber.entered.wait(), 30)
    assert subscriber.called[0][1].status == Run.STOPPED
    assert subscriber.outcome is None
    subscriber.release.set()
    await runs.wait_for_run(run.pk, timeout=30)
    assert subscriber.outcome == "finished"


async def test_a_shutdown_cancels_the_after_work_on_purpose(conversation, alice, subscriber):
    run = await runs.start_run(conversation.pk, "hello", user_id=alice.pk)
    await asyncio.wait_for(subscriber.entered.wait(), 30)
    await runs.shutdown()
    assert subscriber.outcome == "cancelled"
    assert tasks.group_of(RUNS, run.pk) is None


async def test_an_abandoned_run_starts_no_after_work(conversation, alice, subscriber):
    """A run another process marked interrupted is over there: its end is not this one's."""
    subscriber.release.set()
    run = await runs.start_run(conversation.pk, "hello", user_id=alice.pk)
    tasks.ABANDONED.add(run.pk)
    await runs.wait_for_run(run.pk, timeout=30)
    assert subscriber.called == []
    assert run.pk not in tasks.ABANDONED
