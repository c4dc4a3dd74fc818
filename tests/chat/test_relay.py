"""The edge renderer: a stored event announced as data, rendered for one viewer's class."""

from __future__ import annotations

import asyncio
import threading

import pytest
from asgiref.sync import sync_to_async
from django.db import OperationalError

from skills_app.chat import event_views, fragments, relay
from skills_app.core.events import MessageStored, RunFinished, RunStarted, event_from
from skills_app.core.transcript import StoredMessage
from skills_app.models import Conversation, Run
from skills_app.runs import broadcast, eventlog, store
from tests.support.frames import parse

pytestmark = pytest.mark.django_db(transaction=True)

HIDDEN_TEXT = "Base directory for this skill: /x\n\nRELAY-HIDDEN-4be0 follow these steps"


def _hidden_row(conversation_id: int) -> dict:
    """A hidden skill body stored as a run stores it; its announcement as the group gets it."""
    run = Run.objects.create(conversation_id=conversation_id, status=Run.DONE)
    body = StoredMessage.text("user", HIDDEN_TEXT, kind="skill_prompt", is_meta=True)
    row = store.append_message(conversation_id, body, run_id=run.pk)
    data = eventlog.message_event(row)
    stored = eventlog.append_event(conversation_id, "message", data, run_id=run.pk, hidden=True)
    return broadcast.envelope(stored.seq, event_from(stored.type, stored.data), hidden=True)


async def test_a_hidden_event_is_rendered_only_for_a_viewer_who_may_inspect(alice):
    conversation = await Conversation.objects.acreate(owner=alice, title="Relay")
    message = await sync_to_async(_hidden_row)(conversation.pk)
    assert message["hidden"] is True
    renders = relay.cache().renders

    assert await relay.frame(conversation.pk, message, can_inspect=False) is None
    assert relay.cache().renders == renders, "not even rendered for an ordinary viewer"
    shown = await relay.frame(conversation.pk, message, can_inspect=True)
    assert shown is not None and "RELAY-HIDDEN-4be0" in shown  # positive control: the whole frame
    # An announcement that does not say it is not hidden counts as hidden, and so does one whose
    # "hidden" is anything but false.
    unsaid = {key: value for key, value in message.items() if key != "hidden"}
    assert await relay.frame(conversation.pk, unsaid, can_inspect=False) is None
    for vague in (None, 0, "", "false", "visible"):
        assert (
            await relay.frame(conversation.pk, {**message, "hidden": vague}, can_inspect=False)
            is None
        )
    assert relay.cache().renders == renders + 1, "rendered for the inspector only"
    # One that says "not hidden" of a hidden row still shows an ordinary viewer nothing of it:
    # the chat's own filter drops the row.
    wrong = {**message, "hidden": False}
    assert await relay.frame(conversation.pk, wrong, can_inspect=False) is None
    assert relay.cache().renders == renders + 2, "the wrong claim is rendered, and shows nothing"


async def test_a_frame_carries_the_events_ids_and_states_as_data_never_its_text(alice):
    conversation = await Conversation.objects.acreate(owner=alice, title="Relay")

    def visible_row() -> tuple[int, int, dict]:
        run = Run.objects.create(conversation_id=conversation.pk, status=Run.DONE)
        words = StoredMessage.text("user", "RELAY-WORDS-77")
        row = store.append_message(conversation.pk, words, run_id=run.pk)
        data = eventlog.message_event(row)
        stored = eventlog.append_event(conversation.pk, "message", data, run_id=run.pk)
        event = event_from(stored.type, stored.data)
        return run.pk, row.pk, broadcast.envelope(stored.seq, event, hidden=False)

    run_id, message_id, message = await sync_to_async(visible_row)()
    raw = await relay.frame(conversation.pk, message, can_inspect=False)
    assert raw is not None
    frame = parse(raw)
    assert (frame["type"], frame["seq"]) == ("message.stored", message["seq"])
    assert frame["data"] == {
        "message_id": message_id,
        "role": "user",
        "kind": "text",
        "run_id": run_id,
    }
    # The words reach the viewer in the fragment, never in the data.
    assert "RELAY-WORDS-77" in raw and "RELAY-WORDS-77" not in repr(frame["data"])


async def test_markup_of_our_own_is_rendered_while_the_database_thread_is_busy(alice):
    # A tab relays one message at a time: the live text behind `run.started` waits for its
    # render. The Stop button is made from the event alone, so it must not queue behind the
    # runs' database work (held here by a hop that does not end until the render is back).
    conversation = await Conversation.objects.acreate(owner=alice, title="Relay busy")
    started = broadcast.envelope(7, RunStarted(run_id=1), hidden=False)
    release = threading.Event()
    holding = asyncio.ensure_future(sync_to_async(release.wait)(30))
    try:
        await asyncio.sleep(0.05)  # the shared database thread is inside the wait now
        shown = await asyncio.wait_for(
            relay.frame(conversation.pk, started, can_inspect=False), timeout=5
        )
    finally:
        release.set()
        await holding
    assert shown is not None
    assert (parse(shown)["type"], parse(shown)["data"]) == ("run.started", {"run_id": 1})


def test_only_views_of_markup_alone_skip_the_database():
    # Whatever shows a row or passes text through the filter reads the database.
    assert not event_views.reads_rows(RunStarted(run_id=1))
    assert event_views.reads_rows(RunFinished(run_id=1, status="done"))  # the cost header
    assert event_views.reads_rows(MessageStored(message_id=1, role="user", kind="text"))


async def test_a_render_whose_connection_died_is_tried_once_more(alice, monkeypatch):
    """A render thread's connection idle through a database restart fails at its first query:
    the render is read-only, so it is tried again, and the tab gets its frame (not a logged
    error and a gap to fill)."""
    conversation = await Conversation.objects.acreate(owner=alice, title="Relay")

    def visible_row() -> tuple[int, dict]:
        run = Run.objects.create(conversation_id=conversation.pk, status=Run.DONE)
        row = store.append_message(conversation.pk, StoredMessage.text("user", "AGAIN-31"))
        stored = eventlog.append_event(
            conversation.pk, "message", eventlog.message_event(row), run_id=run.pk
        )
        event = event_from(stored.type, stored.data)
        return row.pk, broadcast.envelope(stored.seq, event, hidden=False)

    message_id, message = await sync_to_async(visible_row)()
    real = fragments.fragment_for
    failures = []

    def dies_once(*args, **kwargs):
        if not failures:
            failures.append(1)
            raise OperationalError("server closed the connection unexpectedly")
        return real(*args, **kwargs)

    monkeypatch.setattr(fragments, "fragment_for", dies_once)
    frame = parse(await relay.frame(conversation.pk, message, can_inspect=False))
    assert failures == [1]
    assert (frame["seq"], frame["data"]["message_id"]) == (message["seq"], message_id)

    # A render that fails twice is not hidden: the error reaches the consumer, which logs it
    # and fills the gap from the database at the next event.
    def always_dies(*args, **kwargs):
        raise OperationalError("the database is down")

    monkeypatch.setattr(fragments, "fragment_for", always_dies)
    again = {**message, "seq": message["seq"] + 1000}
    with pytest.raises(OperationalError):
        await relay.frame(conversation.pk, again, can_inspect=False)
