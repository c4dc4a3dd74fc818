"""The typed events: one class per dotted name, JSON both ways, traits the consumer relays by."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from typing import Any, ClassVar

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator

from skills_app.chat import event_views, relay
from skills_app.chat.items import Part, StaticItem
from skills_app.core.events import (
    EVENT_TYPES,
    ApprovalRequested,
    BlockDone,
    BlockStarted,
    EventDataError,
    HookRan,
    MessageStored,
    ModelCalled,
    RunEvent,
    RunFinished,
    TextDelta,
    ToolFinished,
    event_from,
    event_type,
)
from skills_app.models import Conversation, Run
from skills_app.models import RunEvent as StoredEvent
from skills_app.runs import broadcast
from skills_app.runs.broadcast import group_name
from skills_app.runs.recorder import RunRecorder
from tests.chat.test_consumer import _session_cookie
from tests.support.ws_helpers import receive, until
from webapp.asgi import application

EXAMPLES = {
    "model.call": ModelCalled(call=2, model="claude-opus-4-8", skill="pdf", request=object()),
    "tool.result": ToolFinished(
        tool_use_id="toolu_1", name="Bash", is_error=False, content="ok", artifacts=("out/a.md",)
    ),
    "message.stored": MessageStored(message_id=7, role="assistant", kind="text", seq=3, run_id=2),
    "audit.hook": HookRan({"event": "PreToolUse", "skill": "pdf", "ran": True}),
    "text.delta": TextDelta(index=1, text="héllo", run_id=4, call=2, offset=10),
}


def example(cls: type[RunEvent]) -> RunEvent:
    """An event of this class with every required field filled in."""
    values: dict[str, Any] = {}
    for f in fields(cls):
        if f.default is not MISSING or f.default_factory is not MISSING:
            continue
        kind = str(f.type)
        values[f.name] = (
            1
            if kind.startswith("int")
            else {}
            if kind.startswith("dict")
            else ()
            if kind.startswith("tuple")
            else False
            if kind.startswith("bool")
            else f"{cls.type}-{f.name}"
        )
    if cls is BlockStarted:
        values["tool_name"] = "Bash"
    return cls(**values)


def test_the_traits_are_consistent():
    for cls in EVENT_TYPES.values():
        assert cls.stream in ("", "text", "thinking"), cls
        # Live events are relayed as streamed text or as the frame the chat makes of them.
        if not cls.stored and not cls.stream:
            assert cls in event_views.LIVE or cls is BlockDone, cls
    assert all(cls.stored for cls in event_views.STORED)
    assert not any(cls.stored for cls in event_views.LIVE)


@pytest.mark.django_db(transaction=True)
async def test_every_event_type_reaches_a_tab_by_its_traits_alone(alice):
    """No handler per type: every type the group may carry is relayed, none ends the tab."""
    conversation = await Conversation.objects.acreate(owner=alice, title="events")
    cookie = await sync_to_async(_session_cookie)(alice)
    tab = WebsocketCommunicator(
        application,
        f"/ws/conversations/{conversation.pk}/",
        headers=[(b"origin", b"http://127.0.0.1"), (b"cookie", f"sessionid={cookie}".encode())],
    )
    assert (await tab.connect(timeout=10))[0]
    await tab.send_json_to({"action": "resume", "after": 0})
    assert (await receive(tab))["type"] == "resumed"
    layer, group = get_channel_layer(), group_name(conversation.pk)
    seq = 0
    expected: list[tuple[str, Any]] = []
    for name, cls in sorted(EVENT_TYPES.items()):
        event = example(cls)
        message: dict[str, Any] = {"type": name, "event": event.data()}
        if cls.stored:
            seq += 1
            message = broadcast.envelope(seq, event, hidden=False)
            # Sent when the chat shows something of it (rendered here first: the tab then
            # takes the render from the process's cache).
            if await relay.frame(conversation.pk, message, can_inspect=False):
                expected.append(("stored", seq))
        elif cls.stream:
            expected.append((f"{cls.stream}.delta", event.data()["text"]))
        elif event_views.live_frame(event):
            expected.append(("live", name))
        await layer.group_send(group, message)
    await layer.group_send(
        group, broadcast.envelope(seq + 1, RunFinished(run_id=1, status="done"), hidden=False)
    )
    frames = await until(tab, lambda f: f.get("seq") == seq + 1)
    got: list[tuple[str, Any]] = []
    for frame in frames[:-1]:
        if "seq" in frame:
            got.append(("stored", frame["seq"]))
        elif frame.get("type") in ("text.delta", "thinking.delta"):
            got.append((frame["type"], frame["text"]))
        else:
            got.append(("live", frame["type"]))
    assert got == expected
    await tab.disconnect()


def test_every_class_is_registered_under_its_own_dotted_name():
    for name, cls in EVENT_TYPES.items():
        assert cls.type == name and "." in name


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_an_event_survives_its_json(name):
    event = EXAMPLES[name]
    back = event_from(name, event.data())
    assert back == event
    assert back.data() == event.data()


def test_the_request_of_a_model_call_is_not_part_of_its_data():
    assert EXAMPLES["model.call"].data() == {"call": 2, "model": "claude-opus-4-8", "skill": "pdf"}


def test_the_old_message_name_reads_as_message_stored():
    event = event_from("message", {"message_id": 1, "role": "user", "kind": "text"})
    assert isinstance(event, MessageStored) and event.type == "message.stored"
    assert event_type("message") is MessageStored


def test_an_unknown_type_is_refused_by_name():
    with pytest.raises(EventDataError, match="unknown event type 'run.event'"):
        event_type("run.event")


def test_data_missing_a_required_field_says_which():
    with pytest.raises(EventDataError, match="approval.requested event needs 'approval_id'"):
        event_from("approval.requested", {"tool": "Bash"})


def test_keys_it_does_not_know_are_ignored():
    event = event_from("approval.requested", {"approval_id": 3, "extra": "x"})
    assert event == ApprovalRequested(approval_id=3)


@dataclass(frozen=True, slots=True)
class NoteAdded(RunEvent):
    """An event type this test adds, as a new feature would: declared, then given a view."""

    type: ClassVar[str] = "note.added"
    text: str


@pytest.mark.django_db(transaction=True)
async def test_a_new_event_type_is_stored_rendered_and_relayed_without_other_changes(
    alice, monkeypatch
):
    """Adding an event type: its class (core) and, since people see it, one view (chat)."""
    monkeypatch.setitem(EVENT_TYPES, NoteAdded.type, NoteAdded)
    monkeypatch.setattr(event_views, "STORED", dict(event_views.STORED))
    event_views.shows(NoteAdded)(
        lambda event, _conversation_id, _lookup: [Part(StaticItem(f"<p>note: {event.text}</p>"))]
    )
    conversation = await Conversation.objects.acreate(owner=alice, title="notes")
    run = await Run.objects.acreate(conversation=conversation, status=Run.RUNNING)
    cookie = await sync_to_async(_session_cookie)(alice)
    tab = WebsocketCommunicator(
        application,
        f"/ws/conversations/{conversation.pk}/",
        headers=[(b"origin", b"http://127.0.0.1"), (b"cookie", f"sessionid={cookie}".encode())],
    )
    assert (await tab.connect(timeout=10))[0]
    await tab.send_json_to({"action": "resume", "after": 0})
    assert (await receive(tab))["type"] == "resumed"
    seq = await RunRecorder(conversation.pk, run.pk, alice.pk).record(NoteAdded("buy milk"))
    frame = await receive(tab)
    assert (frame["seq"], frame["type"]) == (seq, "note.added")
    assert "<p>note: buy milk</p>" in frame["html"]  # its view rendered it
    stored = await StoredEvent.objects.aget(conversation=conversation, seq=seq)
    assert (stored.type, stored.data) == ("note.added", {"text": "buy milk"})
    await tab.disconnect()
