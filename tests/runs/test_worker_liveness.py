"""The worker registry: workers register, beat and deregister; a silent one is found within seconds
and its runs end as interrupted, whoever notices first (another worker or a web process)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from channels.testing import HttpCommunicator, WebsocketCommunicator
from django.test import Client
from django.utils import timezone

from skills_app.core.transcript import StoredMessage
from skills_app.models import Conversation, Message, Run, StreamPiece, Worker
from skills_app.ops.health import live_workers
from skills_app.runs import agent_setup, broadcast, eventlog, liveness, recovery, store
from skills_app.runs import supervisor as runs
from tests.support.fake_anthropic import Reply, validate_request
from tests.support.loop_helpers import wait_until
from tests.support.worker_helpers import (
    paused,
    running_worker,
    status,
    until,
    wait_event,
)
from tests.support.ws_helpers import receive
from tests.support.ws_helpers import until as ws_until
from webapp.asgi import application

# Only the tests that run code in other threads (async ones) need real transactions.
pytestmark = pytest.mark.django_db


def _ghost(name: str = "ghost-host pid 9 #dead01", *, silent_for: float) -> Worker:
    """A worker row as a process left it, last heard from `silent_for` seconds ago."""
    now = timezone.now()
    return Worker.objects.create(
        name=name,
        channel="specific.ghost!1",
        started_at=now - timedelta(minutes=10),
        heartbeat_at=now - timedelta(seconds=silent_for),
    )


def _run_of(
    worker: str, owner, *, text: str = "half an answer", conversation: Conversation | None = None
) -> Run:
    """A run the worker executes, its own heartbeat fresh, with some text already streamed."""
    if conversation is None:
        conversation = Conversation.objects.create(owner=owner)
    run = Run.objects.create(
        conversation=conversation,
        status=Run.RUNNING,
        worker=worker,
        channel="specific.ghost!1",
        heartbeat_at=timezone.now(),
    )
    store.append_message(conversation.pk, StoredMessage.text("user", "hello"), run_id=run.pk)
    eventlog.append_event(conversation.pk, "model.call", {"call": 1}, run_id=run.pk)
    StreamPiece.objects.create(run=run, call=1, index=0, kind="text", offset=0, text=text)
    return run


def _valid_after_another_turn(conversation_id: int) -> str | None:
    store.append_message(conversation_id, StoredMessage.text("user", "again"))
    conversation = Conversation.objects.get(pk=conversation_id)
    return validate_request(agent_setup.build_request(conversation).as_kwargs())


@pytest.mark.django_db(transaction=True)
async def test_a_worker_registers_beats_and_deregisters(worker_fake, layer):
    async with running_worker() as worker:
        name = worker.loop.name
        row = await Worker.objects.aget(name=name)
        assert row.channel == worker.loop.channel and row.stopped_at is None
        first_beat = row.heartbeat_at
        await until(lambda: Worker.objects.get(name=name).heartbeat_at > first_beat)
        assert await sync_to_async(live_workers)() == 1
    row = await Worker.objects.aget(name=name)
    assert row.stopped_at is not None and row.stop_reason == "shut down"
    assert await sync_to_async(live_workers)() == 0


@pytest.mark.django_db(transaction=True)
async def test_a_worker_that_stops_interrupts_its_runs_at_once(worker_fake, layer, alice):
    conversation = await Conversation.objects.acreate(owner=alice)
    reply, gate, reached = paused("Streaming along nicely. " * 4)
    worker_fake.enqueue(reply)
    try:
        async with running_worker():
            run = await runs.start_run(conversation.pk, "talk", user_id=alice.pk)
            await wait_event(reached)
            # The first deltas are committed (before any of them is sent).
            saved = StreamPiece.objects.filter(run_id=run.pk)
            await wait_until(saved.aexists, what="a saved piece of the streamed text")
    finally:
        gate.set()
    # No waiting for a heartbeat to go stale: the worker said goodbye for its run.
    assert await sync_to_async(status)(run.pk) == Run.INTERRUPTED
    kinds = [
        (m.role, m.kind, m.meta.get("partial", False))
        async for m in Message.objects.filter(conversation=conversation).order_by("seq")
    ]
    assert kinds == [
        ("user", "text", False),
        ("assistant", "text", True),
        ("assistant", "error", False),
    ]
    assert await sync_to_async(_valid_after_another_turn)(conversation.pk) is None


@pytest.mark.django_db(transaction=True)
async def test_a_live_worker_interrupts_the_runs_of_a_silent_one(worker_fake, layer, alice):
    ghost = await sync_to_async(_ghost)(silent_for=0)
    run = await sync_to_async(_run_of)(ghost.name, alice)
    watcher = await layer.new_channel()
    await layer.group_add(broadcast.group_name(run.conversation_id), watcher)
    # Positive control: while the ghost's heartbeat is fresh its run is left alone.
    assert await sync_to_async(recovery.interrupt_orphaned_runs)() == 0

    async with running_worker():
        # The ghost misses its beats from now on (the run's own heartbeat still looks fresh).
        event = await _next(layer, watcher, "run.finished", timeout=10)
    assert event["event"]["status"] == Run.INTERRUPTED
    ghost = await Worker.objects.aget(pk=ghost.pk)
    assert ghost.stopped_at is not None and ghost.stop_reason == "no heartbeat"
    rows = [m async for m in Message.objects.filter(run=run).order_by("seq")]
    assert rows[1].content == [{"type": "text", "text": "half an answer"}]
    assert await sync_to_async(_valid_after_another_turn)(run.conversation_id) is None


async def _next(layer, channel: str, event_type: str, *, timeout: float) -> dict:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        left = deadline - asyncio.get_running_loop().time()
        assert left > 0, f"no {event_type} within {timeout} s"
        message = await asyncio.wait_for(layer.receive(channel), left)
        if message["type"] == event_type:
            return message


@pytest.mark.django_db(transaction=True)
async def test_a_web_process_notices_a_dead_worker_when_no_worker_is_left(
    worker_fake, layer, alice
):
    """The only worker died: the browser's own web process marks its run interrupted."""
    ghost = await sync_to_async(_ghost)(silent_for=0)
    run = await sync_to_async(_run_of)(ghost.name, alice)
    cookie = await sync_to_async(_session_cookie)(alice)
    tab = WebsocketCommunicator(
        application,
        f"/ws/conversations/{run.conversation_id}/",
        headers=[(b"origin", b"http://127.0.0.1"), (b"cookie", f"sessionid={cookie}".encode())],
    )
    assert (await tab.connect(timeout=10))[0]
    try:
        await tab.send_json_to({"action": "resume", "after": 0})
        deadline = asyncio.get_running_loop().time() + 10
        while True:
            frame = await receive(tab, timeout=deadline - asyncio.get_running_loop().time())
            if frame.get("type") == "run.finished":
                break
        assert frame["data"]["status"] == Run.INTERRUPTED
        assert await sync_to_async(status)(run.pk) == Run.INTERRUPTED
    finally:
        await tab.disconnect()
        if recovery._sweeper is not None:
            recovery._sweeper.cancel()


@pytest.mark.django_db(transaction=True)
async def test_a_sweep_a_probe_started_still_tells_the_tab_after_the_probe_ended(
    worker_fake, layer, alice
):
    """`/readyz` reached the process first and ended: its sweep must not die with its context."""
    if recovery._sweeper is not None:
        recovery._sweeper.cancel()
    probe = HttpCommunicator(application, "GET", "/readyz")
    assert (await probe.get_response(timeout=10))["status"] in (200, 503)
    conversation = await Conversation.objects.acreate(owner=alice)
    cookie = await sync_to_async(_session_cookie)(alice)
    tab = WebsocketCommunicator(
        application,
        f"/ws/conversations/{conversation.pk}/",
        headers=[(b"origin", b"http://127.0.0.1"), (b"cookie", f"sessionid={cookie}".encode())],
    )
    assert (await tab.connect(timeout=10))[0]
    try:
        await tab.send_json_to({"action": "resume", "after": 0})
        while (await receive(tab))["type"] != "resumed":
            pass
        # The worker died after the tab resumed: only the live announcement can tell it.
        ghost = await sync_to_async(_ghost)(silent_for=60)
        run = await sync_to_async(_run_of)(ghost.name, alice, conversation=conversation)
        deadline = asyncio.get_running_loop().time() + 5
        while True:
            frame = await receive(tab, timeout=deadline - asyncio.get_running_loop().time())
            if frame.get("type") == "run.finished":
                break
        assert frame["data"]["status"] == Run.INTERRUPTED
        assert await sync_to_async(status)(run.pk) == Run.INTERRUPTED
    finally:
        await tab.disconnect()
        if recovery._sweeper is not None:
            recovery._sweeper.cancel()


@pytest.mark.django_db(transaction=True)
async def test_an_announcement_that_failed_is_sent_again_and_a_resume_shows_it_anyway(
    worker_fake, layer, alice, monkeypatch
):
    failed: list[int] = []
    publish = recovery.publish

    async def flaky(conversation_id, seq, *args, **kwargs):
        if not failed:
            failed.append(seq)
            raise ConnectionError("the channel layer is away")
        await publish(conversation_id, seq, *args, **kwargs)

    monkeypatch.setattr(recovery, "publish", flaky)
    conversation = await Conversation.objects.acreate(owner=alice)
    tab = await _resumed_tab(alice, conversation.pk)
    await until_frame(tab, "resumed", timeout=5)
    try:
        ghost = await sync_to_async(_ghost)(silent_for=60)
        run = await sync_to_async(_run_of)(ghost.name, alice, conversation=conversation)
        recovery.ensure_sweeping()
        frames = await until_frame(tab, "run.finished", timeout=5)
        assert failed and frames[-1]["data"]["status"] == Run.INTERRUPTED
        seqs = [f["seq"] for f in frames if "seq" in f]
        assert seqs == sorted(set(seqs)) and failed[0] in seqs
    finally:
        await tab.disconnect()
        if recovery._sweeper is not None:
            recovery._sweeper.cancel()
    # A tab opened later is told by the stored rows, whatever happened to the announcement.
    late = await _resumed_tab(alice, conversation.pk)
    try:
        frames = await until_frame(late, "resumed", timeout=5)
        finished = [f for f in frames if f["type"] == "run.finished"]
        assert [f["data"]["status"] for f in finished] == [Run.INTERRUPTED]
        assert await sync_to_async(status)(run.pk) == Run.INTERRUPTED
    finally:
        await late.disconnect()


async def _resumed_tab(user, conversation_id: int) -> WebsocketCommunicator:
    """A tab connected to the conversation that sent `resume` (its frames left to read)."""
    cookie = await sync_to_async(_session_cookie)(user)
    tab = WebsocketCommunicator(
        application,
        f"/ws/conversations/{conversation_id}/",
        headers=[(b"origin", b"http://127.0.0.1"), (b"cookie", f"sessionid={cookie}".encode())],
    )
    assert (await tab.connect(timeout=10))[0]
    await tab.send_json_to({"action": "resume", "after": 0})
    return tab


async def until_frame(tab, frame_type: str, *, timeout: float) -> list[dict]:
    """The frames read until one of `frame_type` (inclusive), within `timeout` seconds."""
    return await ws_until(tab, lambda f: f.get("type") == frame_type, timeout=timeout)


def _session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


@pytest.mark.django_db(transaction=True)
async def test_a_worker_taken_for_dead_gives_up_its_runs_and_starts_over(worker_fake, layer, alice):
    """A stalled worker came back after others declared it dead: it must not add to the closed
    history of its runs, and it goes on as a new worker."""
    conversation = await Conversation.objects.acreate(owner=alice)
    reply, gate, reached = paused("Words that will be dropped. " * 4)
    worker_fake.enqueue(reply, Reply.text("Fresh start."))
    async with running_worker() as worker:
        run = await runs.start_run(conversation.pk, "talk", user_id=alice.pk)
        await wait_event(reached)
        first_name = worker.loop.name
        try:
            # Another process found it silent and buried it.
            await Worker.objects.filter(name=first_name).aupdate(
                stopped_at=timezone.now(), stop_reason="no heartbeat"
            )
            await until(lambda: status(run.pk) == Run.INTERRUPTED)
        finally:
            gate.set()
        await runs.wait_for_run(run.pk, timeout=10)
        assert worker.loop.name != first_name
        await until(lambda: Worker.objects.filter(name=worker.loop.name).exists())
        kinds = [
            m.kind async for m in Message.objects.filter(conversation=conversation).order_by("seq")
        ]
        assert kinds[-1] == "error"
        # Still a worker: the next message is answered.
        again = await runs.start_run(conversation.pk, "again", user_id=alice.pk)
        await runs.wait_for_run(again.pk, timeout=20)
        assert await sync_to_async(status)(again.pk) == Run.DONE
        assert (await Run.objects.aget(pk=again.pk)).worker == worker.loop.name


def test_each_dead_worker_is_buried_once_and_forgotten_after_a_day(worker_fake):
    now = timezone.now()
    _ghost("a", silent_for=60)
    _ghost("b", silent_for=0.1)
    assert liveness.bury_dead_workers() == ["a"]
    assert liveness.bury_dead_workers() == []  # a second sweeper finds nothing left to do
    Worker.objects.filter(name="a").update(stopped_at=now - timedelta(days=2))
    assert liveness.forget_old_workers() == 1
    assert list(Worker.objects.values_list("name", flat=True)) == ["b"]


def test_subagent_runs_end_with_their_interrupted_parent(worker_fake, alice):
    _ghost(silent_for=60)
    parent = _run_of("ghost-host pid 9 #dead01", alice)
    child = Run.objects.create(
        conversation_id=parent.conversation_id, parent=parent, status=Run.RUNNING
    )
    recovery.interrupt_orphaned_runs()
    assert status(parent.pk) == status(child.pk) == Run.INTERRUPTED


def test_an_inline_run_with_a_fresh_heartbeat_is_not_taken_for_a_dead_workers(worker_fake, alice):
    """Inline runs have no worker row: only their own heartbeat tells whether they live."""
    conversation = Conversation.objects.create(owner=alice)
    run = Run.objects.create(
        conversation=conversation,
        status=Run.RUNNING,
        worker=liveness.process_identity(),
        heartbeat_at=timezone.now(),
    )
    assert recovery.sweep() == []
    assert status(run.pk) == Run.RUNNING
