"""Browser-side faults on the chat websocket, beyond what test_consumer.py covers.

test_consumer.py has: anonymous / foreign conversation / wrong Origin refused, a handful of
malformed frames, one oversized frame, answering an approval twice in sequence. Here: a drop
mid-run with resume from seq, two tabs racing to answer one approval, more hostile frames, ids
that do not exist or overflow, and a missing Origin.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from skills_app.chat.consumers import MAX_MESSAGE_CHARS
from skills_app.models import Approval, Conversation, Message, PermissionRule, Run, RunEvent
from skills_app.runs import supervisor as runs
from tests.support.fake_anthropic import Reply
from tests.support.ws_helpers import Reader, receive, stored, until
from webapp.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = (b"origin", b"http://127.0.0.1")
ANSWER = "The quick brown fox jumps over the lazy dog, " * 12


def _session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


async def _open(user, path: str, headers: list[tuple[bytes, bytes]] | None = None):
    cookie = await sync_to_async(_session_cookie)(user)
    all_headers = [ORIGIN] if headers is None else list(headers)
    all_headers.append((b"cookie", f"sessionid={cookie}".encode()))
    communicator = WebsocketCommunicator(application, path, headers=all_headers)
    connected, code = await communicator.connect(timeout=10)
    return communicator, connected, code


async def _tab(user, conversation_id: int, after: int = 0):
    """A connected, resumed tab; returns it with the frames the resume replayed."""
    tab, connected, _ = await _open(user, f"/ws/conversations/{conversation_id}/")
    assert connected
    await tab.send_json_to({"action": "resume", "after": after})
    frames = await _until(tab, lambda f: f["type"] == "resumed")
    return tab, frames


async def _until(tab, predicate, *, timeout: float = 15.0) -> list[dict[str, Any]]:
    return await until(tab, predicate, timeout=timeout)


async def _wait_runs(conversation_id: int) -> None:
    for run in [r async for r in Run.objects.filter(conversation_id=conversation_id)]:
        await runs.wait_for_run(run.pk, timeout=20)


@pytest.fixture
def conversation(alice):
    return Conversation.objects.create(owner=alice, title="Faults")


# -- a drop mid-run ------------------------------------------------------------------------------


async def test_a_dropped_socket_resumes_from_its_seq_without_loss_or_duplicates(
    alice, conversation, fake_model
):
    release, reached = threading.Event(), threading.Event()
    fake_model.enqueue(
        Reply.text(
            ANSWER, chunk=5, delay=0.004, wait_for=release, wait_after_events=12, reached=reached
        )
    )
    tab, _ = await _tab(alice, conversation.pk)
    await tab.send_json_to({"action": "send", "text": "tell me about foxes"})
    first = await _until(tab, lambda f: f["type"] == "text.delta")
    await asyncio.get_running_loop().run_in_executor(None, reached.wait, 10)
    # Drain what already arrived, then drop the connection while the answer keeps streaming.
    while not await tab.receive_nothing(timeout=0.2):
        first.append(await receive(tab))
    await tab.disconnect()
    last_seen = max(f["seq"] for f in stored(first))
    release.set()
    await _wait_runs(conversation.pk)  # the rest of the run is stored while nobody listens
    tab, replayed = await _tab(alice, conversation.pk, after=last_seen)
    rest = list(replayed)
    if not any(f["type"] == "run.finished" for f in rest):
        rest += await _until(tab, lambda f: f["type"] == "run.finished")
    await _wait_runs(conversation.pk)
    await tab.disconnect()

    frames = stored(first + rest)
    seqs = [f["seq"] for f in frames]
    assert seqs == sorted(seqs) and len(seqs) == len(set(seqs)), "duplicate or out-of-order seq"
    assert min(f["seq"] for f in stored(rest)) > last_seen
    # Each connection's streamed text is whole (no hole, nothing twice), a beginning of the
    # answer; the stored answer arrives after the drop, once.
    assert ANSWER.startswith(Reader().apply(first).text())
    assert ANSWER.startswith(Reader().apply(rest).text())
    answers = [
        f for f in frames if f["type"] == "message.stored" and f["data"]["role"] == "assistant"
    ]
    assert len(answers) == 1 and answers[0]["seq"] > last_seen
    answer = await Message.objects.aget(pk=answers[0]["data"]["message_id"])
    assert ANSWER.strip() in "".join(block.get("text", "") for block in answer.content)
    # Every event the browser shows reached it exactly once.
    shown = await sync_to_async(_shown_seqs)(conversation.pk)
    assert seqs == shown


def _shown_seqs(conversation_id: int) -> list[int]:
    from skills_app.chat.fragments import replay_html

    rows = list(RunEvent.objects.filter(conversation_id=conversation_id).order_by("seq"))
    return [e.seq for e in replay_html(conversation_id, rows, can_inspect=False) if e.html]


async def test_a_resume_from_the_future_sends_nothing_old(alice, conversation, fake_model):
    fake_model.enqueue(Reply.text("short"))
    tab, _ = await _tab(alice, conversation.pk)
    await tab.send_json_to({"action": "send", "text": "hi"})
    await _until(tab, lambda f: f["type"] == "run.finished")
    await _wait_runs(conversation.pk)
    await tab.disconnect()
    tab, frames = await _tab(alice, conversation.pk, after=10_000)
    assert [(f["type"], f["last_seq"]) for f in frames] == [("resumed", 10_000)]
    await tab.disconnect()


# -- two tabs, one approval ----------------------------------------------------------------------


async def test_two_tabs_answering_one_approval_first_wins_second_is_told(
    alice, conversation, fake_model
):
    await PermissionRule.objects.acreate(behavior="ask", rule_text="Bash(echo *)")
    fake_model.enqueue(Reply.tool_use("Bash", {"command": "echo raced"}), Reply.text("Finished"))
    one, _ = await _tab(alice, conversation.pk)
    two, _ = await _tab(alice, conversation.pk)
    await one.send_json_to({"action": "send", "text": "run it"})
    asked = (await _until(one, lambda f: f["type"] == "approval.requested"))[-1]
    await _until(two, lambda f: f["type"] == "approval.requested")
    answering = asked["data"]["approval_id"]
    await asyncio.gather(
        one.send_json_to({"action": "approve", "approval_id": answering, "answer": "allow_once"}),
        two.send_json_to({"action": "approve", "approval_id": answering, "answer": "deny"}),
    )
    frames_one = await _until(one, lambda f: f["type"] == "run.finished")
    frames_two = await _until(two, lambda f: f["type"] == "run.finished")
    await _wait_runs(conversation.pk)
    errors = {
        name: [f for f in frames if f["type"] == "error"]
        for name, frames in (("allow_once", frames_one), ("deny", frames_two))
    }
    losers = [name for name, found in errors.items() if found]
    assert len(losers) == 1, errors
    assert "already answered" in errors[losers[0]][0]["message"]
    winner = "deny" if losers == ["allow_once"] else "allow_once"
    approval = await Approval.objects.aget(pk=answering)
    assert approval.status == winner
    # Both tabs see the same single answer.
    for frames in (frames_one, frames_two):
        answered = [f for f in frames if f["type"] == "approval.answered"]
        assert len(answered) == 1 and answered[0]["data"]["status"] == winner
    await one.disconnect()
    await two.disconnect()


# -- hostile frames ------------------------------------------------------------------------------

HOSTILE = [
    pytest.param(b"\xff\xfe\x00garbage", "not valid JSON", id="invalid-utf8-bytes"),
    pytest.param(b'{"action": "resume", "after": 0}', None, id="json-as-bytes"),
    pytest.param("null", "JSON object", id="null"),
    pytest.param("42", "JSON object", id="number"),
    pytest.param('"resume"', "JSON object", id="string"),
    pytest.param("{}", "Unknown action", id="no-action"),
    pytest.param('{"action": ["resume"]}', "Unknown action", id="action-list"),
    pytest.param('{"action": "RESUME"}', "Unknown action", id="action-case"),
    pytest.param('{"action": "__init__"}', "Unknown action", id="action-dunder"),
    pytest.param('{"action": "resume", "after": -1}', "whole number", id="negative-after"),
    pytest.param('{"action": "resume", "after": true}', "whole number", id="bool-after"),
    pytest.param('{"action": "resume", "after": 1.5}', "whole number", id="float-after"),
    pytest.param('{"action": "send", "text": 42}', "Type a message", id="send-number"),
    pytest.param('{"action": "send", "text": "   "}', "Type a message", id="send-blank"),
    pytest.param(
        '{"action": "approve", "approval_id": 1, "answer": 7}', "approval_id", id="answer-number"
    ),
    pytest.param(
        '{"action": "approve", "approval_id": 99999, "answer": "allow_once"}',
        "no such approval",
        id="approve-unknown-id",
    ),
    pytest.param("[" * 20_000 + "]" * 20_000, "not valid JSON", id="deep-nesting"),
    pytest.param('{"action": "send", "text": "a\\ud800b"}', "not valid text", id="lone-surrogate"),
]


@pytest.mark.parametrize(("payload", "expected"), HOSTILE)
async def test_hostile_frames_get_an_error_and_leave_the_socket_usable(
    alice, conversation, payload, expected
):
    tab, _ = await _tab(alice, conversation.pk)
    if isinstance(payload, bytes):
        await tab.send_to(bytes_data=payload)
    else:
        await tab.send_to(text_data=payload)
    frame = await receive(tab)
    if expected is None:
        assert frame["type"] == "resumed"
    else:
        assert frame["type"] == "error", frame
        assert expected.lower() in frame["message"].lower()
        assert "Traceback" not in repr(frame)
    assert not await Run.objects.filter(conversation=conversation).aexists()
    await tab.send_json_to({"action": "stop"})
    assert (await _skip_to(tab, "info"))["message"] == "Nothing is running."
    await tab.disconnect()
    await _wait_runs(conversation.pk)


async def _skip_to(tab, frame_type: str) -> dict[str, Any]:
    frames = await _until(tab, lambda f: f["type"] == frame_type, timeout=10)
    return frames[-1]


async def test_a_message_over_the_character_limit_starts_nothing(alice, conversation):
    tab, _ = await _tab(alice, conversation.pk)
    await tab.send_json_to({"action": "send", "text": "y" * (MAX_MESSAGE_CHARS + 1)})
    frame = await receive(tab)
    assert frame["type"] == "error" and "too long" in frame["message"]
    assert not await Run.objects.filter(conversation=conversation).aexists()
    assert not await Message.objects.filter(conversation=conversation).aexists()
    await tab.disconnect()


async def test_a_flood_of_frames_is_answered_in_order(alice, conversation):
    tab, _ = await _tab(alice, conversation.pk)
    for after in range(200):
        await tab.send_to(text_data=json.dumps({"action": "resume", "after": after}))
    answers = [await receive(tab, timeout=10) for _ in range(200)]
    assert [a["last_seq"] for a in answers] == list(range(200))
    await tab.disconnect()


# -- ids and origins -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "conversation_id", ["999999", "99999999999999999999999", "0"], ids=["missing", "huge", "zero"]
)
async def test_a_conversation_that_does_not_exist_is_refused(alice, conversation_id):
    tab, connected, code = await _open(alice, f"/ws/conversations/{conversation_id}/")
    assert not connected and code == 4403
    await tab.disconnect()


async def test_actions_in_ones_own_socket_cannot_reach_another_users_run(
    alice, bob, conversation, fake_model
):
    """Stop and retry act on the socket's conversation only, never on a foreign active run."""
    foreign = await Conversation.objects.acreate(owner=bob, title="Bob's")
    bob_run = await Run.objects.acreate(conversation=foreign, status=Run.RUNNING)
    tab, _ = await _tab(alice, conversation.pk)
    await tab.send_json_to({"action": "stop", "run_id": bob_run.pk, "conversation_id": foreign.pk})
    frame = await receive(tab)
    assert (frame["type"], frame["message"]) == ("info", "Nothing is running.")
    await tab.send_json_to({"action": "retry", "conversation_id": foreign.pk})
    frame = await receive(tab)
    assert frame["type"] == "error" and "no earlier message" in frame["message"]
    await bob_run.arefresh_from_db()
    assert bob_run.status == Run.RUNNING
    await tab.disconnect()


async def test_a_missing_origin_is_refused(alice, conversation):
    tab, connected, _ = await _open(alice, f"/ws/conversations/{conversation.pk}/", headers=[])
    assert not connected
    await tab.disconnect()


@pytest.mark.parametrize(
    "origin",
    [b"null", b"http://127.0.0.1.evil.example", b"http://evil.example:80", b"file://"],
)
async def test_a_lookalike_origin_is_refused(alice, conversation, origin):
    tab, connected, _ = await _open(
        alice, f"/ws/conversations/{conversation.pk}/", headers=[(b"origin", origin)]
    )
    assert not connected
    await tab.disconnect()


# -- a slow tab whose channel overflowed ---------------------------------------------------------


async def test_events_the_channel_layer_dropped_are_sent_from_the_database(alice, conversation):
    """The in-memory and Redis layers drop messages for a full channel; the next one fills the gap."""
    from skills_app.core.events import MessageStored
    from skills_app.core.transcript import StoredMessage
    from skills_app.runs import eventlog, store
    from skills_app.runs.broadcast import publish

    def store_three() -> tuple[int, MessageStored, list[int]]:
        ids = []
        for text in ("one", "two", "three"):
            row = store.append_message(conversation.pk, StoredMessage.text("user", text))
            event = MessageStored(message_id=row.pk, role="user", kind="text", seq=row.seq)
            stored_event = eventlog.append_event(conversation.pk, event)
            ids.append(row.pk)
        return stored_event.seq, event, ids

    tab, _ = await _tab(alice, conversation.pk)
    seq, event, ids = await sync_to_async(store_three)()
    # Only the last event is broadcast, as if the first two had been dropped on a full channel.
    await publish(conversation.pk, seq, event)
    frames = [await receive(tab) for _ in range(3)]
    assert [f["seq"] for f in frames] == [1, 2, 3]
    assert [f["data"]["message_id"] for f in frames] == ids
    assert await tab.receive_nothing(timeout=0.3)
    await tab.disconnect()
