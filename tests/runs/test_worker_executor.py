"""RUN_EXECUTOR=worker in one process: runs are queued, claimed and executed by Channels workers.

The workers here run in the test's event loop on the in-memory layer, but each keeps its own
task registry, so `runs.stop_run` and `runs.wait_for_run` take the same cross-process paths they
take against a real `runworker` (tests/multiprocess covers that with Redis and PostgreSQL).
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from asgiref.sync import sync_to_async
from django.db import transaction
from django.utils import timezone

from skills_app import textlog
from skills_app.core.transcript import StoredMessage
from skills_app.models import Conversation, Message, Run, Worker
from skills_app.runs import agent_setup, broadcast, jobs, queue, store, tasks
from skills_app.runs import supervisor as runs
from tests.support.fake_anthropic import Reply, validate_request
from tests.support.worker_helpers import (
    after_ticks,
    paused,
    running_worker,
    status,
    until,
    wait_event,
)

pytestmark = pytest.mark.django_db(transaction=True)


# The rows a test needs are made before its worker starts (`alice` and `conversation` come
# first): fixtures write from the main thread, the worker reads from its own, and the in-memory
# test database (SQLite's shared cache) refuses a write to a table another connection is reading
# at that moment ("database table is locked", without waiting), as a full run showed once.
@pytest.fixture
def conversation(alice):
    return Conversation.objects.create(owner=alice, title="Worker chat")


async def test_it_queues_the_run_and_a_worker_executes_it(
    alice, conversation, worker_fake, layer, worker
):
    worker_fake.enqueue(Reply.text("Hello from the worker."))
    watcher = await layer.new_channel()
    await layer.group_add(broadcast.group_name(conversation.pk), watcher)

    run = await runs.start_run(conversation.pk, "hi", user_id=alice.pk)
    assert run.status == Run.QUEUED and not tasks.executing_here(jobs.RUNS, run.pk)  # not here
    await runs.wait_for_run(run.pk, timeout=20)

    run = await Run.objects.aget(pk=run.pk)
    assert run.status == Run.DONE
    assert run.worker == worker.loop.name and run.channel == worker.loop.channel
    assert run.started_by_id == alice.pk and run.claimed_at is not None
    texts = [
        row.content[0]["text"]
        async for row in Message.objects.filter(conversation=conversation).order_by("seq")
    ]
    assert texts == ["hi", "Hello from the worker."]
    seen = []
    while not seen or seen[-1] != "run.finished":
        seen.append((await asyncio.wait_for(layer.receive(watcher), 5))["type"])
    # The user's message was stored (and announced) with the queued run, before any worker ran.
    assert seen[:3] == ["message.stored", "run.queued", "run.started"] and "text.delta" in seen


async def test_one_worker_executes_several_runs_at_once(alice, worker_fake, worker):
    first = await Conversation.objects.acreate(owner=alice, title="one")
    second = await Conversation.objects.acreate(owner=alice, title="two")
    (reply_a, gate_a, reached_a), (reply_b, gate_b, reached_b) = (
        paused("Answer A " * 8),
        paused("Answer B " * 8),
    )
    worker_fake.enqueue(reply_a, reply_b)
    run_a = await runs.start_run(first.pk, "a", user_id=alice.pk)
    await wait_event(reached_a)
    run_b = await runs.start_run(second.pk, "b", user_id=alice.pk)
    # The second run streams while the first is still paused: the worker did not await run A.
    await wait_event(reached_b)
    gate_a.set()
    gate_b.set()
    for run in (run_a, run_b):
        await runs.wait_for_run(run.pk, timeout=20)
        assert (await Run.objects.aget(pk=run.pk)).status == Run.DONE


async def test_a_full_worker_leaves_further_runs_queued_until_one_ends(
    worker_fake, settings, layer, alice
):
    settings.WORKER_MAX_RUNS = 1
    first = await Conversation.objects.acreate(owner=alice, title="one")
    second = await Conversation.objects.acreate(owner=alice, title="two")
    reply, gate, reached = paused("The long one. " * 6)
    worker_fake.enqueue(reply, Reply.text("The second answer."))
    async with running_worker() as worker:
        await runs.start_run(first.pk, "a", user_id=alice.pk)
        await wait_event(reached)
        run_b = await runs.start_run(second.pk, "b", user_id=alice.pk)
        try:
            # The wake-up and several looks at the queue later, the second run still waits.
            await after_ticks(worker, 4)
            assert await sync_to_async(status)(run_b.pk) == Run.QUEUED
        finally:
            gate.set()
        await runs.wait_for_run(run_b.pk, timeout=20)
    assert await sync_to_async(status)(run_b.pk) == Run.DONE


def _streamed(run_id: int) -> str:
    return "".join(block["text"] for block in textlog.streamed_text(run_id))


async def test_stop_reaches_the_run_through_its_workers_channel(
    alice, conversation, worker_fake, worker
):
    reply, gate, reached = paused("The first part is here. " * 4)
    worker_fake.enqueue(reply)
    run = await runs.start_run(conversation.pk, "talk", user_id=alice.pk)
    await wait_event(reached)
    # The run holds the text it streamed (what a stop keeps) once the text is saved.
    await until(lambda: _streamed(run.pk).startswith("The first"))
    started = asyncio.get_running_loop().time()
    try:
        assert await runs.stop_run(run.pk)
    finally:
        gate.set()
    assert asyncio.get_running_loop().time() - started < 3
    run = await Run.objects.aget(pk=run.pk)
    assert run.status == Run.STOPPED
    request = (await sync_to_async(agent_setup.build_request)(conversation)).as_kwargs()
    assert request["messages"][-1]["content"][0]["text"].startswith("The first")
    request["messages"].append({"role": "user", "content": "go on"})
    assert validate_request(request) is None


async def test_stop_reaches_the_run_through_the_flag_when_its_channel_is_unknown(
    alice, conversation, worker_fake, worker
):
    reply, gate, reached = paused("Some words to stream. " * 4)
    worker_fake.enqueue(reply)
    run = await runs.start_run(conversation.pk, "talk", user_id=alice.pk)
    await wait_event(reached)
    await Run.objects.filter(pk=run.pk).aupdate(channel="")  # as if the stop message were lost
    try:
        assert await runs.stop_run(run.pk)
    finally:
        gate.set()
    assert (await Run.objects.aget(pk=run.pk)).status == Run.STOPPED


async def test_the_worker_ignores_malformed_messages_and_keeps_working(
    alice, conversation, worker_fake, layer, worker
):
    await layer.send(queue.RUN_CHANNEL, {"type": "run.execute", "run_id": "nope"})
    await layer.send(queue.RUN_CHANNEL, {"type": "no.such.handler"})
    await layer.send(queue.RUN_CHANNEL, {"type": "run.stop"})
    worker_fake.enqueue(Reply.text("Still here."))
    run = await runs.start_run(conversation.pk, "hi", user_id=alice.pk)
    await runs.wait_for_run(run.pk, timeout=20)
    run = await Run.objects.aget(pk=run.pk)
    # The same worker took it: its consumer survived the bad messages.
    assert run.status == Run.DONE and run.worker == worker.loop.name


def _queue_at_once(owner, count: int) -> list[int]:
    """`count` runs queued in one transaction: a burst no worker sees half of."""
    ids = []
    with transaction.atomic():
        for i in range(count):
            conversation = Conversation.objects.create(owner=owner, title=f"burst {i}")
            run = Run.objects.create(
                conversation=conversation, status=Run.QUEUED, prompt="go", started_by=owner
            )
            store.append_message(conversation.pk, StoredMessage.text("user", "go"), run_id=run.pk)
            ids.append(run.pk)
    return ids


async def test_a_burst_of_messages_spreads_over_the_workers(worker_fake, layer, alice):
    replies = [paused(f"Answer {i} " * 6) for i in range(6)]
    worker_fake.enqueue(*(reply for reply, _gate, _reached in replies))
    async with running_worker() as first, running_worker() as second:
        queued = await sync_to_async(_queue_at_once)(alice, 6)
        first.loop.poke()
        second.loop.poke()
        try:
            for _reply, _gate, reached in replies:
                await wait_event(reached)
        finally:
            for _reply, gate, _reached in replies:
                gate.set()
        for run_id in queued:
            await runs.wait_for_run(run_id, timeout=20)
        executed_by = [(await Run.objects.aget(pk=run_id)).worker for run_id in queued]
    # Whichever worker looked first took its share, not the whole burst.
    assert executed_by.count(first.loop.name) == executed_by.count(second.loop.name) == 3


async def test_a_worker_takes_its_share_of_the_work(worker_fake, alice):
    for i in range(5):
        conversation = await Conversation.objects.acreate(owner=alice, title=f"c{i}")
        await runs.start_run(conversation.pk, "go", user_id=alice.pk)
    assert await sync_to_async(queue.fair_share)(0) == 5  # no live worker: one would take all
    now = timezone.now()
    for name in ("a", "b"):
        await Worker.objects.acreate(name=name, started_at=now, heartbeat_at=now)
    assert await sync_to_async(queue.fair_share)(0) == 3
    # "a" now executes 3: of the 5 runs in all, its share (3) is taken; the idle "b" takes the
    # 2 still queued.
    taken = await sync_to_async(queue.claim)(worker="a", channel="", limit=3)
    assert len(taken) == 3
    assert await sync_to_async(queue.fair_share)(3) == 0
    assert await sync_to_async(queue.fair_share)(0) == 2


async def test_the_worker_imports_the_sdk_off_its_loop_before_it_registers(monkeypatch, layer):
    # Imported by the first model call instead, the SDK held the worker's loop for 1.3 s (5 s
    # on a loaded machine): long enough for the heartbeat's bound to find the worker dead.
    from skills_app.runs import workers

    loaded: list[tuple[bool, bool]] = []  # (on the loop's thread, registered already)
    loop_thread = threading.get_ident()

    def load_sdk() -> None:
        registered = Worker.objects.exists()
        loaded.append((threading.get_ident() == loop_thread, registered))

    monkeypatch.setattr(workers, "load_sdk", load_sdk)
    async with running_worker():
        pass
    assert loaded == [(False, False)]
