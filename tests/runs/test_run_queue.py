"""The run queue: a message sent while no worker runs is kept, shown as waiting, and answered later.

Workers run in the test's loop (`tests.support.worker_helpers`); the wait of a minute with real processes
is in tests/multiprocess.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from skills_app.models import Conversation, Message, Run, RunEvent
from skills_app.policy.limits import LimitReached, check_send
from skills_app.runs import queue, recovery
from skills_app.runs import supervisor as runs
from tests.support.fake_anthropic import Reply
from tests.support.worker_helpers import running_worker, status
from tests.support.ws_helpers import receive
from webapp.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)

WAITING = "Waiting for a worker"


@pytest.fixture
def conversation(alice):
    return Conversation.objects.create(owner=alice, title="Queued chat")


def _session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


async def _tab(user, conversation_id: int) -> WebsocketCommunicator:
    cookie = await sync_to_async(_session_cookie)(user)
    tab = WebsocketCommunicator(
        application,
        f"/ws/conversations/{conversation_id}/",
        headers=[(b"origin", b"http://127.0.0.1"), (b"cookie", f"sessionid={cookie}".encode())],
    )
    connected, _ = await tab.connect(timeout=10)
    assert connected
    await tab.send_json_to({"action": "resume", "after": 0})
    await _until(tab, lambda f: f.get("type") == "resumed")
    return tab


async def _until(tab, predicate, *, timeout: float = 15.0) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = []
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        left = deadline - asyncio.get_running_loop().time()
        assert left > 0, f"no matching frame; saw {[f.get('type') for f in frames]}"
        frames.append(await receive(tab, timeout=left))
        if predicate(frames[-1]):
            return frames


def _texts(conversation_id: int) -> list[tuple[str, str]]:
    rows = Message.objects.filter(conversation_id=conversation_id).order_by("seq")
    return [(row.role, row.content[0].get("text", "")) for row in rows]


async def test_a_message_sent_with_no_worker_waits_visibly_and_is_answered_when_one_starts(
    worker_fake, layer, conversation, alice
):
    worker_fake.enqueue(Reply.text("Sorry for the wait."))
    tab = await _tab(alice, conversation.pk)
    try:
        await tab.send_json_to({"action": "send", "text": "anyone there?"})
        frames = await _until(tab, lambda f: f.get("type") == "run.queued")
        user_rows = [
            f for f in frames if f.get("type") == "message.stored" and f["data"]["role"] == "user"
        ]
        assert user_rows
        asked = await Message.objects.aget(pk=user_rows[0]["data"]["message_id"])
        assert asked.content[0]["text"] == "anyone there?"
        run = await Run.objects.aget(conversation=conversation)
        assert frames[-1]["data"] == {"run_id": run.pk}
        assert run.status == Run.QUEUED and run.prompt == "anyone there?"
        # A sweep (as every web process and worker runs) leaves a queued run alone.
        assert await sync_to_async(recovery.interrupt_orphaned_runs)() == 0
        # The page, loaded now, shows the message and the waiting line too.
        page = await sync_to_async(_page)(alice, conversation.pk)
        assert "anyone there?" in page and WAITING in page

        async with running_worker():
            frames = await _until(tab, lambda f: f.get("type") == "run.finished")
        assert [f["type"] for f in frames][0] == "run.started"
        assert frames[-1]["data"]["status"] == Run.DONE
    finally:
        await tab.disconnect()
    assert await sync_to_async(_texts)(conversation.pk) == [
        ("user", "anyone there?"),
        ("assistant", "Sorry for the wait."),
    ]
    assert worker_fake.requests[-1]["messages"][-1]["content"][0]["text"] == "anyone there?"
    page = await sync_to_async(_page)(alice, conversation.pk)
    assert WAITING not in page


def _page(user, conversation_id: int) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(f"/c/{conversation_id}/")
    assert response.status_code == 200
    return response.content.decode()


async def test_a_lost_wake_up_only_delays_the_run(
    worker_fake, layer, conversation, alice, monkeypatch
):
    async def unreachable(channel: str, message: dict[str, Any]) -> None:
        raise layer.ChannelFull()

    monkeypatch.setattr(layer, "send", unreachable)
    worker_fake.enqueue(Reply.text("Found it in the queue."))
    run = await runs.start_run(conversation.pk, "hi", user_id=alice.pk)  # no error for the user
    assert await sync_to_async(status)(run.pk) == Run.QUEUED
    async with running_worker():
        await runs.wait_for_run(run.pk, timeout=20)
    assert await sync_to_async(status)(run.pk) == Run.DONE


async def test_a_queued_run_stopped_never_starts_and_retry_sends_the_message_again(
    worker_fake, layer, conversation, alice
):
    tab = await _tab(alice, conversation.pk)
    try:
        await tab.send_json_to({"action": "send", "text": "never mind"})
        await _until(tab, lambda f: f.get("type") == "run.queued")
        await tab.send_json_to({"action": "stop"})
        frames = await _until(tab, lambda f: f.get("type") == "run.finished")
        assert frames[-1]["data"]["status"] == Run.STOPPED
        assert await sync_to_async(status)((await Run.objects.aget()).pk) == Run.STOPPED

        worker_fake.enqueue(Reply.text("Here it is after all."))
        await tab.send_json_to({"action": "retry"})
        await _until(tab, lambda f: f.get("type") == "run.queued")
        async with running_worker():
            frames = await _until(tab, lambda f: f.get("type") == "run.finished")
        assert frames[-1]["data"]["status"] == Run.DONE
    finally:
        await tab.disconnect()
    # The stopped run never reached the model; the retry sent the stored message once.
    assert len(worker_fake.requests) == 1
    sent = worker_fake.requests[0]["messages"]
    assert [m["role"] for m in sent] == ["user"]
    assert [b["text"] for b in sent[0]["content"] if b["type"] == "text"] == ["never mind"]
    statuses = [r.status async for r in Run.objects.order_by("pk")]
    assert statuses == [Run.STOPPED, Run.DONE]
    # The stop's note stays in the transcript (never in what the model is sent).
    assert await sync_to_async(_texts)(conversation.pk) == [
        ("user", "never mind"),
        ("assistant", "Stopped."),
        ("assistant", "Here it is after all."),
    ]


async def test_a_stop_and_a_claim_of_the_same_queued_run_never_both_win(
    worker_fake, conversation, alice
):
    run = await runs.start_run(conversation.pk, "hi", user_id=alice.pk)
    stopped = await runs.stop_run(run.pk)
    claimed = await sync_to_async(queue.claim)(worker="w", channel="c", limit=5)
    assert stopped and claimed == []
    run = await runs.start_run(conversation.pk, "again", user_id=alice.pk)
    claimed = await sync_to_async(queue.claim)(worker="w", channel="c", limit=5)
    assert [c.run_id for c in claimed] == [run.pk]
    again = await sync_to_async(queue.claim)(worker="v", channel="d", limit=5, run_id=run.pk)
    assert again == []
    assert (await Run.objects.aget(pk=run.pk)).worker == "w"


async def test_workers_take_the_oldest_queued_run_first(worker_fake, alice):
    conversations = [
        await Conversation.objects.acreate(owner=alice, title=f"c{i}") for i in range(3)
    ]
    queued = [await runs.start_run(c.pk, "hi", user_id=alice.pk) for c in conversations]
    claimed = await sync_to_async(queue.claim)(worker="w", channel="c", limit=2)
    assert [c.run_id for c in claimed] == [queued[0].pk, queued[1].pk]
    assert all(c.user_id == alice.pk for c in claimed)


async def test_queued_runs_count_against_the_senders_limit(worker_fake, settings, alice, bob):
    """Nobody can fill the queue for everyone: a queued run is an answer in progress."""
    settings.RATE_LIMIT_CONCURRENT_RUNS = 2
    for i in range(2):
        conversation = await Conversation.objects.acreate(owner=alice, title=f"c{i}")
        await runs.start_run(conversation.pk, "hi", user_id=alice.pk)
    with pytest.raises(LimitReached, match="2 answers in progress"):
        await sync_to_async(check_send)(alice.pk)
    await sync_to_async(check_send)(bob.pk)  # another user is not held back


async def test_the_queued_event_says_nothing_but_the_run(worker_fake, conversation, alice):
    await runs.start_run(conversation.pk, "/secret-skill with args", user_id=alice.pk)
    event = await RunEvent.objects.aget(type="run.queued")
    assert event.data == {"run_id": event.run_id} and not event.hidden
