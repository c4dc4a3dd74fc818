"""Announcing stored events: data only, and only once their transaction committed."""

from __future__ import annotations

import asyncio

import pytest
from django.db import transaction

from skills_app.core.events import RunStarted, TextDelta
from skills_app.runs import broadcast

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_event_is_announced_once_its_transaction_commits_and_never_after_a_rollback():
    outbox: broadcast.Outbox = []
    with transaction.atomic():
        broadcast.publish_on_commit(outbox, 7, 3, RunStarted(run_id=5), hidden=False)
        assert outbox == [], "nothing goes out before the commit"
    started = RunStarted(run_id=5)
    assert outbox == [
        (7, {"type": "run.started", "seq": 3, "hidden": False, "event": started.data()})
    ]

    with pytest.raises(RuntimeError), transaction.atomic():
        broadcast.publish_on_commit(outbox, 7, 4, RunStarted(run_id=6), hidden=True)
        raise RuntimeError("the write failed")
    assert [message["seq"] for _, message in outbox] == [3]


def test_a_hidden_event_says_so_and_carries_no_html():
    message = broadcast.envelope(9, RunStarted(run_id=1), hidden=True)
    assert message["hidden"] is True
    assert set(message) == {"type", "seq", "hidden", "event"}


async def test_live_frames_of_many_conversations_overlap_and_each_stays_in_order(monkeypatch):
    # A layer whose sends take a round trip of varying length: the frames of one conversation
    # must still go out in order, and those of different conversations side by side.
    sent: list[tuple[int, int]] = []
    in_flight, most = 0, 0

    async def round_trip(conversation_id: int, event: TextDelta) -> None:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.002 * ((event.offset + conversation_id) % 3))
        in_flight -= 1
        sent.append((conversation_id, event.offset))

    monkeypatch.setattr(broadcast, "send_live", round_trip)
    items = [
        (conversation, TextDelta(index=0, text="x", run_id=conversation, call=1, offset=offset))
        for offset in range(5)
        for conversation in range(1, 21)
    ]
    await broadcast.send_live_many(items)

    assert sorted(sent) == sorted((c, e.offset) for c, e in items), "every frame once"
    for conversation in range(1, 21):
        offsets = [offset for c, offset in sent if c == conversation]
        assert offsets == sorted(offsets), f"conversation {conversation} out of order"
    assert most > 1, "conversations did not go out side by side"
    assert most <= broadcast.LANES
