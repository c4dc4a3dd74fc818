from __future__ import annotations

import threading
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import transaction
from django.db.models.signals import post_save
from django.test import Client

from skills_app.chat import actions, relay
from skills_app.chat.consumers import ConversationConsumer
from skills_app.core.events import RunStarted
from skills_app.core.transcript import StoredMessage, status_message_text
from skills_app.models import Approval, Conversation, Message, PermissionRule, Run, RunEvent
from skills_app.runs import broadcast, eventlog, store
from skills_app.runs import supervisor as runs
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import use_fake_model
from tests.support.ws_helpers import Reader, receive, stored, until
from webapp.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = (b"origin", b"http://127.0.0.1")
HIDDEN_BODY = "Base directory for this skill: /x\n\nHIDDEN-BODY-91c2 do the thing"


def _session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


async def _connect(user, conversation_id: int, *, origin: tuple[bytes, bytes] = ORIGIN):
    headers = [origin]
    if user is not None:
        cookie = await sync_to_async(_session_cookie)(user)
        headers.append((b"cookie", f"sessionid={cookie}".encode()))
    communicator = WebsocketCommunicator(
        application, f"/ws/conversations/{conversation_id}/", headers=headers
    )
    connected, code = await communicator.connect(timeout=10)
    return communicator, connected, code


async def _frames_until(communicator, predicate, *, timeout: float = 10.0) -> list[dict[str, Any]]:
    """Collect frames until one satisfies predicate (inclusive)."""
    return await until(communicator, predicate, timeout=timeout)


async def _text_of(frame: dict[str, Any]) -> str:
    """The stored text of the message a `message.stored` frame names (by its data)."""
    row = await Message.objects.aget(pk=frame["data"]["message_id"])
    return "".join(block.get("text", "") for block in row.content)


async def _frames_left(communicator, *, quiet: float = 0.5) -> list[dict[str, Any]]:
    """The frames that come until the socket has said nothing for `quiet` seconds."""
    frames = []
    while not await communicator.receive_nothing(timeout=quiet):
        frames.append(await receive(communicator))
    return frames


def _finished(frame: dict[str, Any]) -> bool:
    return frame.get("type") == "run.finished"


async def _wait_runs_done(conversation_id: int) -> None:
    for run in [r async for r in Run.objects.filter(conversation_id=conversation_id)]:
        await runs.wait_for_run(run.pk, timeout=15)


@pytest.fixture
def conversation(alice):
    return Conversation.objects.create(owner=alice, title="Chat")


@pytest.fixture
def fake_model(settings, fake_anthropic):
    use_fake_model(settings, fake_anthropic, retries=0)
    return fake_anthropic


# -- who may connect ----------------------------------------------------------------------------


async def test_it_refuses_anonymous_users(conversation):
    communicator, connected, code = await _connect(None, conversation.pk)
    assert not connected
    assert code == 4403
    await communicator.disconnect()


async def test_it_refuses_a_foreign_conversation(bob, conversation):
    communicator, connected, code = await _connect(bob, conversation.pk)
    assert not connected
    assert code == 4403
    await communicator.disconnect()


async def test_it_refuses_a_wrong_origin(alice, conversation):
    communicator, connected, _code = await _connect(
        alice, conversation.pk, origin=(b"origin", b"http://evil.example")
    )
    assert not connected
    await communicator.disconnect()


async def test_it_accepts_the_owner(alice, conversation):
    communicator, connected, _code = await _connect(alice, conversation.pk)
    assert connected
    await communicator.send_json_to({"action": "resume", "after": 0})
    frame = await receive(communicator)
    assert (frame["type"], frame["last_seq"]) == ("resumed", 0)
    await communicator.disconnect()


# -- replay -------------------------------------------------------------------------------------


def _store_events(conversation: Conversation) -> dict[str, int]:
    """A stored run with a visible and a hidden message; returns the message ids."""
    run = Run.objects.create(conversation=conversation, status=Run.DONE)
    status = Message.objects.create(
        conversation=conversation,
        seq=1,
        role="user",
        kind="skill_status",
        content=[{"type": "text", "text": status_message_text("notes", "a.md")}],
        run=run,
    )
    hidden = Message.objects.create(
        conversation=conversation,
        seq=2,
        role="user",
        kind="skill_prompt",
        is_meta=True,
        content=[{"type": "text", "text": HIDDEN_BODY}],
        run=run,
    )
    events = [
        ("run.started", {"run_id": run.pk, "demo": True, "label": "Demo"}, False),
        ("text.delta", {"index": 0, "text": "Hel"}, False),
        (
            "message.stored",
            {"message_id": status.pk, "role": "user", "kind": "skill_status", "is_meta": False},
            False,
        ),
        (
            "message.stored",
            {"message_id": hidden.pk, "role": "user", "kind": "skill_prompt", "is_meta": True},
            True,
        ),
        ("audit.tool", {"tool": "Read"}, False),
        ("run.finished", {"run_id": run.pk, "status": "done", "error": "", "kind": ""}, False),
    ]
    for seq, (type_, data, hidden_flag) in enumerate(events, start=1):
        RunEvent.objects.create(
            conversation=conversation, run=run, seq=seq, type=type_, data=data, hidden=hidden_flag
        )
    Conversation.objects.filter(pk=conversation.pk).update(last_event_seq=len(events))
    return {"status": status.pk, "hidden": hidden.pk}


async def test_it_replays_events_after_the_given_seq(alice, conversation):
    ids = await sync_to_async(_store_events)(conversation)
    communicator, _connected, _code = await _connect(alice, conversation.pk)
    await communicator.send_json_to({"action": "resume", "after": 2})
    frames = await _frames_until(communicator, lambda f: f["type"] == "resumed")
    assert [f.get("seq") for f in frames] == [3, 6, None]
    assert frames[0]["type"] == "message.stored"
    assert frames[0]["data"]["message_id"] == ids["status"]
    assert frames[0]["data"]["kind"] == "skill_status"
    assert frames[-1]["last_seq"] == 6
    await communicator.disconnect()


async def test_it_never_sends_hidden_content_to_an_ordinary_user(alice, conversation):
    await sync_to_async(_store_events)(conversation)
    communicator, _connected, _code = await _connect(alice, conversation.pk)
    await communicator.send_json_to({"action": "resume", "after": 0})
    frames = await _frames_until(communicator, lambda f: f["type"] == "resumed")
    assert "HIDDEN-BODY" not in repr(frames)
    assert "audit.tool" not in {f["type"] for f in frames}
    # Shown: the run starting, the skill's status row, the run finishing. A stored text piece
    # of an old log, the hidden row and the audit are not: the browser shows nothing of them.
    assert [f.get("seq") for f in frames] == [1, 3, 6, None]
    await communicator.disconnect()


async def test_it_sends_hidden_content_to_an_auditor(auditor, conversation):
    await sync_to_async(Conversation.objects.filter(pk=conversation.pk).update)(owner=auditor)
    ids = await sync_to_async(_store_events)(conversation)
    communicator, _connected, _code = await _connect(auditor, conversation.pk)
    await communicator.send_json_to({"action": "resume", "after": 0})
    frames = await _frames_until(communicator, lambda f: f["type"] == "resumed")
    hidden = [f for f in stored(frames) if f["data"].get("message_id") == ids["hidden"]]
    assert len(hidden) == 1
    assert hidden[0]["data"]["kind"] == "skill_prompt"
    assert "HIDDEN-BODY-91c2" in repr(hidden[0])  # the positive control: the text reached them
    await communicator.disconnect()


# -- sending and streaming ----------------------------------------------------------------------


async def test_it_streams_a_reply_to_a_sent_message(alice, conversation, fake_model):
    fake_model.enqueue(Reply.text("Hello **there**, friend", chunk=4, delay=0.01))
    communicator, _connected, _code = await _connect(alice, conversation.pk)
    await communicator.send_json_to({"action": "resume", "after": 0})
    await _frames_until(communicator, lambda f: f["type"] == "resumed")
    await communicator.send_json_to({"action": "send", "text": "hi there"})
    frames = await _frames_until(communicator, _finished)
    await _wait_runs_done(conversation.pk)
    types = [f["type"] for f in frames]
    # The user's message is stored and shown the moment it is sent, before the run starts.
    assert types[:2] == ["message.stored", "run.started"]
    assert "text.delta" in types
    assert Reader().apply(frames).text() == "Hello **there**, friend"
    seqs = [f["seq"] for f in stored(frames)]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    messages = [f for f in frames if f["type"] == "message.stored"]
    assert [m["data"]["role"] for m in messages] == ["user", "assistant"]
    assert await _text_of(messages[0]) == "hi there"
    assert await _text_of(messages[-1]) == "Hello **there**, friend"
    assert frames[-1]["data"]["status"] == "done"
    await communicator.disconnect()


async def test_a_second_tab_sees_the_same_stream(alice, conversation, fake_model):
    fake_model.enqueue(Reply.text("Shared answer", chunk=3))
    first, _c1, _ = await _connect(alice, conversation.pk)
    second, _c2, _ = await _connect(alice, conversation.pk)
    for tab in (first, second):
        await tab.send_json_to({"action": "resume", "after": 0})
        await _frames_until(tab, lambda f: f["type"] == "resumed")
    await first.send_json_to({"action": "send", "text": "go"})
    one = await _frames_until(first, _finished)
    two = await _frames_until(second, _finished)
    await _wait_runs_done(conversation.pk)
    assert [f["seq"] for f in stored(one)] == [f["seq"] for f in stored(two)]
    assert Reader().apply(one).text() == Reader().apply(two).text() == "Shared answer"
    await first.disconnect()
    await second.disconnect()


async def test_it_rate_limits_messages_per_minute(alice, conversation, settings):
    settings.RATE_LIMIT_MESSAGES_PER_MINUTE = 1
    await Run.objects.acreate(conversation=conversation, status=Run.DONE)
    communicator, _connected, _code = await _connect(alice, conversation.pk)
    await communicator.send_json_to({"action": "send", "text": "hello"})
    frame = await receive(communicator)
    assert frame["type"] == "error"
    assert "limit is 1" in frame["message"] and frame["retry"] is True
    assert await Run.objects.filter(conversation=conversation).acount() == 1
    await communicator.disconnect()


async def test_it_limits_concurrent_runs(alice, conversation, settings):
    settings.RATE_LIMIT_CONCURRENT_RUNS = 1
    other = await Conversation.objects.acreate(owner=alice, title="Other")
    await Run.objects.acreate(conversation=other, status=Run.RUNNING)
    communicator, _connected, _code = await _connect(alice, conversation.pk)
    await communicator.send_json_to({"action": "send", "text": "hello"})
    frame = await receive(communicator)
    assert frame["type"] == "error"
    assert "in progress" in frame["message"]
    await communicator.disconnect()


async def test_it_retries_the_last_user_message(alice, conversation, fake_model):
    await Message.objects.acreate(
        conversation=conversation,
        seq=1,
        role="user",
        content=[{"type": "text", "text": "again please"}],
    )
    fake_model.enqueue(Reply.text("Second try"))
    communicator, _connected, _code = await _connect(alice, conversation.pk)
    await communicator.send_json_to({"action": "resume", "after": 0})
    await _frames_until(communicator, lambda f: f["type"] == "resumed")
    await communicator.send_json_to({"action": "retry"})
    frames = await _frames_until(communicator, _finished)
    await _wait_runs_done(conversation.pk)
    assert fake_model.requests[-1]["messages"][-1]["content"][-1]["text"] == "again please"
    # A retry sends the stored message again; it does not store (or show) it a second time.
    assert not any(f["data"]["role"] == "user" for f in frames if f["type"] == "message.stored")
    users = Message.objects.filter(conversation=conversation, role="user")
    assert await users.acount() == 1
    await communicator.disconnect()


# -- approvals and stop -------------------------------------------------------------------------


async def test_it_answers_an_approval_over_the_socket(alice, conversation, fake_model):
    await PermissionRule.objects.acreate(behavior="ask", rule_text="Bash(echo *)")
    fake_model.enqueue(
        Reply.tool_use("Bash", {"command": "echo approved-ok"}), Reply.text("All done")
    )
    communicator, _connected, _code = await _connect(alice, conversation.pk)
    await communicator.send_json_to({"action": "resume", "after": 0})
    await _frames_until(communicator, lambda f: f["type"] == "resumed")
    await communicator.send_json_to({"action": "send", "text": "run it"})
    frames = await _frames_until(communicator, lambda f: f["type"] == "approval.requested")
    requested = frames[-1]
    # What htmx sends for the form: the fields as strings, the pressed button's value.
    await communicator.send_json_to(
        {
            "action": "approve",
            "approval_id": str(requested["data"]["approval_id"]),
            "answer": "allow_once",
            "reason": "",
            "HEADERS": {"HX-Request": "true"},
        }
    )
    frames = await _frames_until(communicator, _finished)
    await _wait_runs_done(conversation.pk)
    answered = [f for f in frames if f["type"] == "approval.answered"]
    assert answered and answered[0]["data"]["status"] == "allow_once"
    results = [f for f in frames if f["type"] == "tool.result"]
    assert results and results[0]["data"]["is_error"] is False
    result = await Message.objects.aget(conversation=conversation, kind="tool_result")
    assert "approved-ok" in repr(result.content), "the approved command ran"
    assert frames[-1]["data"]["status"] == "done"
    await communicator.disconnect()


async def test_a_second_answer_is_told_already_answered(alice, conversation):
    run = await Run.objects.acreate(conversation=conversation, status=Run.DONE)
    approval = await Approval.objects.acreate(
        conversation=conversation, run=run, tool="Bash", call_text="Bash(x)", status=Approval.DENY
    )
    communicator, _connected, _code = await _connect(alice, conversation.pk)
    await communicator.send_json_to(
        {"action": "approve", "approval_id": approval.pk, "answer": "allow_once"}
    )
    frame = await receive(communicator)
    assert frame["type"] == "error"
    assert "already answered" in frame["message"]
    await communicator.disconnect()


async def test_it_refuses_answering_another_conversations_approval(alice, bob, conversation):
    foreign = await Conversation.objects.acreate(owner=bob, title="Bob")
    run = await Run.objects.acreate(conversation=foreign, status=Run.WAITING)
    approval = await Approval.objects.acreate(
        conversation=foreign, run=run, tool="Bash", call_text="Bash(x)"
    )
    communicator, _connected, _code = await _connect(alice, conversation.pk)
    await communicator.send_json_to(
        {"action": "approve", "approval_id": approval.pk, "answer": "allow_once"}
    )
    frame = await receive(communicator)
    assert frame["type"] == "error"
    await approval.arefresh_from_db()
    assert approval.status == Approval.PENDING
    await communicator.disconnect()


async def test_it_stops_a_running_answer(alice, conversation, fake_model):
    release = threading.Event()
    reached = threading.Event()
    fake_model.enqueue(
        Reply.text(
            "partial words then more",
            chunk=4,
            wait_for=release,
            wait_after_events=5,
            reached=reached,
        )
    )
    communicator, _connected, _code = await _connect(alice, conversation.pk)
    await communicator.send_json_to({"action": "resume", "after": 0})
    await _frames_until(communicator, lambda f: f["type"] == "resumed")
    try:
        await communicator.send_json_to({"action": "send", "text": "talk"})
        await _frames_until(communicator, lambda f: f["type"] == "text.delta")
        await communicator.send_json_to({"action": "stop"})
        frames = await _frames_until(communicator, _finished)
    finally:
        release.set()
    await _wait_runs_done(conversation.pk)
    assert frames[-1]["data"]["status"] == "stopped"
    # The note arrives as a stored row before the end, so a reload shows it too.
    notes = [f for f in frames if f["type"] == "message.stored" and f["data"]["kind"] == "notice"]
    assert len(notes) == 1 and await _text_of(notes[0]) == "Stopped."
    run = await Run.objects.aget(conversation=conversation)
    assert run.status == Run.STOPPED
    await communicator.disconnect()


async def test_stop_without_a_run_says_nothing_is_running(alice, conversation):
    communicator, _connected, _code = await _connect(alice, conversation.pk)
    await communicator.send_json_to({"action": "stop"})
    frame = await receive(communicator)
    assert (frame["type"], frame["message"]) == ("info", "Nothing is running.")
    await communicator.disconnect()


# -- malformed frames ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ("not json", "not valid JSON"),
        ("[1, 2]", "JSON object"),
        ('{"action": "dance"}', "Unknown action"),
        ('{"action": "resume", "after": "x"}', "whole number"),
        ('{"action": "send", "text": ""}', "Type a message"),
        ('{"action": "approve", "approval_id": "1"}', "approval_id"),
    ],
)
async def test_it_answers_malformed_frames_with_an_error(alice, conversation, payload, expected):
    communicator, _connected, _code = await _connect(alice, conversation.pk)
    await communicator.send_to(text_data=payload)
    frame = await receive(communicator)
    assert frame["type"] == "error"
    assert expected in frame["message"]
    # The socket is still usable afterwards.
    await communicator.send_json_to({"action": "resume", "after": 0})
    assert (await receive(communicator))["type"] == "resumed"
    await communicator.disconnect()


async def test_it_refuses_oversized_frames(alice, conversation):
    communicator, _connected, _code = await _connect(alice, conversation.pk)
    await communicator.send_json_to({"action": "send", "text": "x" * (70 * 1024)})
    frame = await receive(communicator)
    assert frame["type"] == "error"
    assert "too large" in frame["message"]
    assert not await Run.objects.filter(conversation=conversation).aexists()
    await communicator.disconnect()


async def test_a_tabs_own_events_come_in_order_when_a_worker_announces_before_them(
    alice, conversation, settings, monkeypatch
):
    """A worker may take a new run the moment it is committed and announce its first event
    before the web process has announced the user's message. The tab that sent it sees a gap,
    fills it from the database once, and shows every event once, in order."""
    settings.RUN_EXECUTOR = "worker"  # no worker runs here: the receiver below plays the one
    replays: list[int] = []
    replay = ConversationConsumer.__dict__["_replay"]

    async def counted(self, after, *, with_streams):
        replays.append(after)
        return await replay.__get__(self, type(self))(after, with_streams=with_streams)

    monkeypatch.setattr(ConversationConsumer, "_replay", counted)

    def worker_takes_it(sender, instance, created, **kwargs):
        if not created:
            return

        def announce_started() -> None:
            row = eventlog.append_event(
                instance.conversation_id, RunStarted(run_id=instance.pk), run_id=instance.pk
            )
            # As another process would: before the web process announces the user's message.
            async_to_sync(broadcast.broadcast_events)([row])

        transaction.on_commit(announce_started)

    post_save.connect(worker_takes_it, sender=Run, weak=False)
    try:
        tab, _connected, _code = await _connect(alice, conversation.pk)
        await tab.send_json_to({"action": "resume", "after": 0})
        await _frames_until(tab, lambda f: f["type"] == "resumed")
        await tab.send_json_to({"action": "send", "text": "hello"})
        frames = await _frames_until(tab, lambda f: f["type"] == "run.started")
    finally:
        post_save.disconnect(worker_takes_it, sender=Run)
    assert [f["type"] for f in stored(frames)] == ["message.stored", "run.queued", "run.started"]
    assert await _text_of(stored(frames)[0]) == "hello"
    seqs = [f["seq"] for f in stored(frames)]
    assert seqs == sorted(seqs) and len(set(seqs)) == 3
    assert replays == [0, 0], "the resume, then the gap the worker's event showed"
    # The group's copies of the tab's own events come later and are not sent twice.
    assert await tab.receive_nothing(timeout=0.5)
    await tab.disconnect()


# -- a tab's own action's events, through the group like everyone's (attacks) ---------------------------------------

OWN_VISIBLE = "OWN-VISIBLE-3f0d"
OTHER_VISIBLE = "OTHER-VISIBLE-58be"


def _store_a_turn_with_a_hidden_row(conversation_id: int, marker: str) -> list[RunEvent]:
    """A visible user message and a hidden skill body, stored as an action would."""
    run = Run.objects.create(conversation_id=conversation_id, status=Run.DONE)
    visible = store.append_message(
        conversation_id, StoredMessage.text("user", marker), run_id=run.pk
    )
    body = StoredMessage.text("user", HIDDEN_BODY, kind="skill_prompt", is_meta=True)
    hidden = store.append_message(conversation_id, body, run_id=run.pk)
    return [
        eventlog.append_event(
            conversation_id, "message", eventlog.message_event(visible), run_id=run.pk
        ),
        eventlog.append_event(
            conversation_id,
            "message",
            eventlog.message_event(hidden),
            run_id=run.pk,
            hidden=True,
        ),
    ]


def _acting_that_announces(monkeypatch, other_conversation_id: int, *, then=None) -> None:
    """Every websocket action first stores and announces a turn in the tab's conversation and
    in another one, then `then`."""
    real = actions.perform

    async def perform(action, fields, *, conversation_id, user_id):
        other = await sync_to_async(_store_a_turn_with_a_hidden_row)(
            other_conversation_id, OTHER_VISIBLE
        )
        own = await sync_to_async(_store_a_turn_with_a_hidden_row)(conversation_id, OWN_VISIBLE)
        await broadcast.broadcast_events(other + own)
        if then is not None:
            await then()
        return await real(action, fields, conversation_id=conversation_id, user_id=user_id)

    monkeypatch.setattr(actions, "perform", perform)


async def test_an_ordinary_user_gets_nothing_hidden_from_their_own_actions_events(
    alice, conversation, monkeypatch
):
    other = await Conversation.objects.acreate(owner=alice, title="Other")
    _acting_that_announces(monkeypatch, other.pk)
    tab, _connected, _code = await _connect(alice, conversation.pk)
    await tab.send_json_to({"action": "resume", "after": 0})
    await _frames_until(tab, lambda f: f["type"] == "resumed")
    await tab.send_json_to({"action": "stop"})
    frames = await _frames_until(tab, lambda f: f.get("seq") == 1)
    assert [f["seq"] for f in stored(frames)] == [1]
    assert await _text_of(stored(frames)[0]) == OWN_VISIBLE
    # The hidden row (seq 2) never comes: not rendered for this viewer, not sent.
    frames += await _frames_left(tab)
    assert [f["seq"] for f in stored(frames)] == [1]
    assert "HIDDEN-BODY" not in repr(frames) and OTHER_VISIBLE not in repr(frames)
    await tab.disconnect()


async def test_tabs_of_one_conversation_share_one_render_and_none_gets_hidden_text(
    alice, conversation
):
    """Three tabs of an ordinary user: a visible row is rendered once for the three, the hidden
    row after it is rendered for none and reaches none."""
    tabs = [(await _connect(alice, conversation.pk))[0] for _ in range(3)]
    for tab in tabs:
        await tab.send_json_to({"action": "resume", "after": 0})
        await _frames_until(tab, lambda f: f["type"] == "resumed")
    renders = relay.cache().renders
    events = await sync_to_async(_store_a_turn_with_a_hidden_row)(conversation.pk, OWN_VISIBLE)
    await broadcast.broadcast_events(events)
    for tab in tabs:
        frames = await _frames_until(tab, lambda f: f.get("seq") == 1)
        frames += await _frames_left(tab)
        assert [f["seq"] for f in stored(frames)] == [1]
        assert await _text_of(stored(frames)[0]) == OWN_VISIBLE
        assert "HIDDEN-BODY" not in repr(frames)
        await tab.disconnect()
    assert relay.cache().renders == renders + 1


async def test_an_auditor_gets_the_hidden_row_of_their_own_action_once(auditor, monkeypatch):
    conversation = await Conversation.objects.acreate(owner=auditor, title="Audited")
    other = await Conversation.objects.acreate(owner=auditor, title="Other")
    _acting_that_announces(monkeypatch, other.pk)
    tab, _connected, _code = await _connect(auditor, conversation.pk)
    await tab.send_json_to({"action": "resume", "after": 0})
    await _frames_until(tab, lambda f: f["type"] == "resumed")
    await tab.send_json_to({"action": "stop"})
    frames = await _frames_until(tab, lambda f: f.get("seq") == 2)
    assert [f["seq"] for f in stored(frames)] == [1, 2]
    assert await _text_of(stored(frames)[1]) == HIDDEN_BODY
    assert "HIDDEN-BODY-91c2" in repr(stored(frames)[1])  # the positive control: it reached them
    assert OTHER_VISIBLE not in repr(frames)
    assert await tab.receive_nothing(timeout=0.5)
    await tab.disconnect()


async def test_an_action_that_fails_after_announcing_still_shows_its_events_once(
    alice, conversation, monkeypatch
):
    """The events stored before the refusal reach the tab (through the group), in order, once."""
    other = await Conversation.objects.acreate(owner=alice, title="Other")

    async def refuse() -> None:
        raise actions.ActionError("Refused halfway.", retry=False)

    _acting_that_announces(monkeypatch, other.pk, then=refuse)
    tab, _connected, _code = await _connect(alice, conversation.pk)
    await tab.send_json_to({"action": "resume", "after": 0})
    await _frames_until(tab, lambda f: f["type"] == "resumed")
    await tab.send_json_to({"action": "stop"})
    frames = await _frames_until(tab, lambda f: f.get("seq") == 1, timeout=5)
    assert [f["type"] for f in frames if "seq" not in f] == ["error"]
    assert "Refused halfway." in repr(frames)
    assert [f["seq"] for f in stored(frames)] == [1]
    assert "HIDDEN-BODY" not in repr(frames) and OTHER_VISIBLE not in repr(frames)
    assert await tab.receive_nothing(timeout=0.5)
    await tab.disconnect()


async def test_a_tab_not_resumed_yet_gets_its_actions_events_from_the_resume_once(
    alice, conversation, monkeypatch
):
    other = await Conversation.objects.acreate(owner=alice, title="Other")
    _acting_that_announces(monkeypatch, other.pk)
    tab, _connected, _code = await _connect(alice, conversation.pk)
    await tab.send_json_to({"action": "stop"})  # before any resume
    frames = await _frames_until(tab, lambda f: f["type"] == "info")
    assert stored(frames) == []
    await tab.send_json_to({"action": "resume", "after": 0})
    frames = await _frames_until(tab, lambda f: f["type"] == "resumed")
    assert [f["seq"] for f in stored(frames)] == [1]
    assert frames[-1]["last_seq"] == 2
    assert "HIDDEN-BODY" not in repr(frames) and OTHER_VISIBLE not in repr(frames)
    assert await tab.receive_nothing(timeout=0.5)
    await tab.disconnect()
