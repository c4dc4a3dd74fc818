"""RUN_EXECUTOR=worker in one process: the web side hands runs to a Channels worker over the layer.

The worker here runs in the test's event loop on the in-memory layer, but it keeps its own task
registry, so `runs.stop_run` and `runs.wait_for_run` take the same cross-process paths they take
against a real `runworker` (tests/multiprocess covers that with Redis and PostgreSQL).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.routing import ChannelNameRouter

from skills_app.models import Conversation, Message, Run
from skills_app.routing import channel_routes
from skills_app.runs import store, tasks
from skills_app.runs import supervisor as runs
from skills_app.runs.workers import RunWorker
from tests.fake_anthropic import Reply, validate_request
from tests.loop_helpers import use_fake_model

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fake(settings, fake_anthropic):
    use_fake_model(settings, fake_anthropic)
    settings.RUN_EXECUTOR = "worker"
    return fake_anthropic


@pytest.fixture
async def layer() -> AsyncIterator[Any]:
    channel_layer = get_channel_layer()
    await channel_layer.flush()
    yield channel_layer
    await channel_layer.flush()


@pytest.fixture
async def worker(layer) -> AsyncIterator[RunWorker]:
    """A `runworker skillscope-runs` equivalent running beside the test."""
    instance = RunWorker(
        application=ChannelNameRouter(channel_routes),
        channels=[runs.RUN_CHANNEL],
        channel_layer=layer,
    )
    task = asyncio.ensure_future(instance.arun())
    yield instance
    task.cancel()
    for details in list(instance.application_instances.values()):
        details["future"].cancel()
    await asyncio.gather(task, return_exceptions=True)


@pytest.fixture
def conversation(alice):
    return Conversation.objects.create(owner=alice, title="Worker chat")


async def _wait(event: threading.Event, timeout: float = 10) -> None:
    reached = await asyncio.get_running_loop().run_in_executor(None, event.wait, timeout)
    assert reached, "the fake model never reached its pause"


def _paused(text: str) -> tuple[Reply, threading.Event, threading.Event]:
    gate, reached = threading.Event(), threading.Event()
    reply = Reply.text(text, chunk=6, wait_for=gate, wait_after_events=8, reached=reached)
    return reply, gate, reached


async def test_it_hands_the_run_to_a_worker_which_executes_it(
    fake, layer, worker, conversation, alice
):
    fake.enqueue(Reply.text("Hello from the worker."))
    watcher = await layer.new_channel()
    await layer.group_add(store.group_name(conversation.pk), watcher)

    run = await runs.start_run(conversation.pk, "hi", user_id=alice.pk)
    assert run.pk not in tasks.RUNNING  # nothing executes in the "web" side
    await runs.wait_for_run(run.pk, timeout=20)

    run = await Run.objects.aget(pk=run.pk)
    assert run.status == Run.DONE
    assert run.channel.startswith("specific.") and "pid" in run.worker
    assert run.heartbeat_at is not None
    texts = [
        row.content[0]["text"]
        async for row in Message.objects.filter(conversation=conversation).order_by("seq")
    ]
    assert texts == ["hi", "Hello from the worker."]
    seen = []
    while not seen or seen[-1] != "run.finished":
        seen.append((await asyncio.wait_for(layer.receive(watcher), 5))["type"])
    # The user's message was stored (and announced) by the web process before the worker ran.
    assert seen[:2] == ["message.stored", "run.started"] and "text.delta" in seen


async def test_one_worker_executes_several_runs_at_once(fake, worker, alice):
    first = await Conversation.objects.acreate(owner=alice, title="one")
    second = await Conversation.objects.acreate(owner=alice, title="two")
    (reply_a, gate_a, reached_a), (reply_b, gate_b, reached_b) = (
        _paused("Answer A " * 8),
        _paused("Answer B " * 8),
    )
    fake.enqueue(reply_a, reply_b)
    run_a = await runs.start_run(first.pk, "a", user_id=alice.pk)
    await _wait(reached_a)
    run_b = await runs.start_run(second.pk, "b", user_id=alice.pk)
    # The second run streams while the first is still paused: the handler did not await run A.
    await _wait(reached_b)
    gate_a.set()
    gate_b.set()
    for run in (run_a, run_b):
        await runs.wait_for_run(run.pk, timeout=20)
        assert (await Run.objects.aget(pk=run.pk)).status == Run.DONE


async def test_stop_reaches_the_run_through_its_workers_channel(fake, worker, conversation, alice):
    reply, gate, reached = _paused("The first part is here. " * 4)
    fake.enqueue(reply)
    run = await runs.start_run(conversation.pk, "talk", user_id=alice.pk)
    await _wait(reached)
    await asyncio.sleep(0.2)  # let the streamed deltas be recorded
    started = asyncio.get_running_loop().time()
    try:
        assert await runs.stop_run(run.pk)
    finally:
        gate.set()
    # Far below the heartbeat (5 s by default): the channel message did it, not the flag.
    assert asyncio.get_running_loop().time() - started < 3
    run = await Run.objects.aget(pk=run.pk)
    assert run.status == Run.STOPPED
    request = (await sync_to_async(store.build_request)(conversation)).as_kwargs()
    assert request["messages"][-1]["content"][0]["text"].startswith("The first")
    request["messages"].append({"role": "user", "content": "go on"})
    assert validate_request(request) is None


async def test_stop_reaches_the_run_through_the_flag_when_its_channel_is_unknown(
    fake, settings, worker, conversation, alice
):
    settings.RUN_HEARTBEAT_SECONDS = 0.2
    reply, gate, reached = _paused("Some words to stream. " * 4)
    fake.enqueue(reply)
    run = await runs.start_run(conversation.pk, "talk", user_id=alice.pk)
    await _wait(reached)
    await Run.objects.filter(pk=run.pk).aupdate(channel="")  # as if the stop message were lost
    try:
        assert await runs.stop_run(run.pk)
    finally:
        gate.set()
    assert (await Run.objects.aget(pk=run.pk)).status == Run.STOPPED


async def test_a_run_stopped_before_a_worker_takes_it_never_starts(
    fake, layer, conversation, alice
):
    run = await runs.start_run(conversation.pk, "hi", user_id=alice.pk)
    assert await runs.stop_run(run.pk)
    assert (await Run.objects.aget(pk=run.pk)).status == Run.STOPPED

    queued = layer.channels[runs.RUN_CHANNEL]
    assert queued.qsize() == 1  # the run.execute waits for a worker

    instance = RunWorker(
        application=ChannelNameRouter(channel_routes),
        channels=[runs.RUN_CHANNEL],
        channel_layer=layer,
    )
    task = asyncio.ensure_future(instance.arun())
    try:
        for _ in range(40):
            if queued.empty():
                break
            await asyncio.sleep(0.05)
        assert queued.empty(), "the worker never took the queued run.execute"
        await asyncio.sleep(0.3)  # time for it to claim (and be refused) and to call the model
    finally:
        task.cancel()
        for details in list(instance.application_instances.values()):
            details["future"].cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert fake.requests == []
    run = await Run.objects.aget(pk=run.pk)
    assert run.status == Run.STOPPED and run.channel == ""


async def test_a_run_that_cannot_be_handed_to_a_worker_fails_with_a_reason(
    fake, layer, conversation, alice, monkeypatch
):
    async def full(channel: str, message: dict[str, Any]) -> None:
        raise layer.ChannelFull()

    monkeypatch.setattr(layer, "send", full)
    with pytest.raises(runs.RunError, match="could not be handed to a worker"):
        await runs.start_run(conversation.pk, "hi", user_id=alice.pk)
    run = await Run.objects.aget(conversation=conversation)
    assert run.status == Run.FAILED and run.error_kind == "dispatch"


async def test_the_worker_ignores_a_malformed_message_and_keeps_working(
    fake, layer, worker, conversation, alice
):
    await layer.send(runs.RUN_CHANNEL, {"type": "run.execute", "run_id": "nope"})
    fake.enqueue(Reply.text("Still here."))
    run = await runs.start_run(conversation.pk, "hi", user_id=alice.pk)
    await runs.wait_for_run(run.pk, timeout=20)
    assert (await Run.objects.aget(pk=run.pk)).status == Run.DONE
