"""An action a tab sends again after a reconnect is acknowledged, and taken once (issue 44)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from skills_app.chat import receipts
from skills_app.models import ActionReceipt, Conversation, Message, Run
from tests.chat.test_consumer import _connect, _wait_runs_done
from tests.support.fake_anthropic import Reply
from tests.support.ws_helpers import receive, until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def conversation(alice):
    conversation = Conversation.objects.create(owner=alice, title="Chat")
    Message.objects.create(
        conversation=conversation, seq=1, role="user", content=[{"type": "text", "text": "again"}]
    )
    return conversation


def acked(action_id: str):
    return lambda frame: frame == {"type": "action.ack", "action_id": action_id}


async def test_the_same_action_sent_twice_is_taken_once_and_acknowledged_twice(
    alice, conversation, fake_model
):
    fake_model.enqueue(Reply.text("Second try"), Reply.text("A third try must not happen"))
    action_id = str(uuid.uuid4())
    tab, _connected, _code = await _connect(alice, conversation.pk)
    await tab.send_json_to({"action": "resume", "after": 0})
    await until(tab, lambda f: f["type"] == "resumed")
    await tab.send_json_to({"action": "retry", "action_id": action_id})
    await until(tab, acked(action_id))
    await _wait_runs_done(conversation.pk)
    # The tab reconnected and sends what it has no acknowledgement of... and one it has.
    await tab.send_json_to({"action": "retry", "action_id": action_id})
    await until(tab, acked(action_id))
    await _wait_runs_done(conversation.pk)
    assert await Run.objects.filter(conversation=conversation).acount() == 1
    assert len(fake_model.requests) == 1
    await tab.disconnect()


async def test_a_second_tab_sending_the_same_action_takes_it_once(alice, conversation, fake_model):
    fake_model.enqueue(Reply.text("Second try"), Reply.text("A third try must not happen"))
    action_id = str(uuid.uuid4())
    first, _connected, _code = await _connect(alice, conversation.pk)
    second, _connected, _code = await _connect(alice, conversation.pk)
    for tab in (first, second):
        await tab.send_json_to({"action": "retry", "action_id": action_id})
    for tab in (first, second):
        await until(tab, acked(action_id))
    await _wait_runs_done(conversation.pk)
    assert await Run.objects.filter(conversation=conversation).acount() == 1
    await first.disconnect()
    await second.disconnect()


async def test_a_refused_action_is_acknowledged_too(alice, conversation):
    action_id = str(uuid.uuid4())
    tab, _connected, _code = await _connect(alice, conversation.pk)
    await tab.send_json_to({"action": "cancel", "action_id": action_id})
    frames = await until(tab, acked(action_id))
    assert [f["type"] for f in frames] == ["error", "action.ack"]
    await tab.disconnect()


async def test_a_malformed_action_id_is_refused_and_nothing_is_taken(alice, conversation):
    tab, _connected, _code = await _connect(alice, conversation.pk)
    await tab.send_json_to({"action": "retry", "action_id": "not-a-uuid"})
    frame = await receive(tab)
    assert frame["type"] == "error" and "uuid" in frame["message"]
    assert await Run.objects.filter(conversation=conversation).acount() == 0
    await tab.disconnect()


def test_receipts_older_than_a_day_are_pruned(alice, conversation):
    old, new = uuid.uuid4(), uuid.uuid4()
    assert receipts.record(alice.pk, old, "retry", conversation.pk)
    ActionReceipt.objects.filter(action_id=old).update(
        created_at=timezone.now() - receipts.KEEP - timedelta(minutes=1)
    )
    assert receipts.record(alice.pk, new, "retry", conversation.pk)
    assert not receipts.record(alice.pk, new, "retry", conversation.pk)
    assert receipts.prune() == 1
    assert list(ActionReceipt.objects.values_list("action_id", flat=True)) == [new]


async def test_a_flood_of_fresh_action_ids_is_refused_past_the_cap_and_stores_nothing_more(
    alice, conversation, monkeypatch
):
    """A script sending actions with ever new ids grows the receipts by at most the cap a
    minute; past it each is refused in words, acknowledged, and not taken."""
    monkeypatch.setattr(receipts, "PER_MINUTE", 5)
    tab, _connected, _code = await _connect(alice, conversation.pk)
    refused = []
    for _ in range(8):
        action_id = str(uuid.uuid4())
        await tab.send_json_to({"action": "cancel", "action_id": action_id})
        frames = await until(tab, acked(action_id))
        refused.append([f["message"] for f in frames if f["type"] == "error"])
    assert await ActionReceipt.objects.filter(user=alice).acount() == 5
    assert all("Too many actions" not in " ".join(m) for m in refused[:5])
    assert all(len(m) == 1 and "Too many actions in a minute" in m[0] for m in refused[5:])
    # An action sent again under a stored id is still only acknowledged, cap or not.
    first = (await ActionReceipt.objects.filter(user=alice).afirst()).action_id
    await tab.send_json_to({"action": "cancel", "action_id": str(first)})
    frames = await until(tab, acked(str(first)))
    assert [f["type"] for f in frames] == ["action.ack"]
    await tab.disconnect()
