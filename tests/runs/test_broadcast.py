"""Announcing stored events: data only, and only once their transaction committed."""

from __future__ import annotations

import pytest
from django.db import transaction

from skills_app.core.events import RunStarted
from skills_app.runs import broadcast

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_event_is_announced_once_its_transaction_commits_and_never_after_a_rollback():
    outbox: broadcast.Outbox = []
    with transaction.atomic():
        broadcast.publish_on_commit(outbox, 7, 3, RunStarted(run_id=5), hidden=False)
        assert outbox == [], "nothing goes out before the commit"
    started = RunStarted(run_id=5)
    assert outbox == [
        (7, {"type": "run.started", "seq": 3, "visibility": "visible", "event": started.data()})
    ]

    with pytest.raises(RuntimeError), transaction.atomic():
        broadcast.publish_on_commit(outbox, 7, 4, RunStarted(run_id=6), hidden=True)
        raise RuntimeError("the write failed")
    assert [message["seq"] for _, message in outbox] == [3]


def test_a_hidden_event_says_so_and_carries_no_html():
    message = broadcast.envelope(9, RunStarted(run_id=1), hidden=True)
    assert message["visibility"] == broadcast.HIDDEN
    assert set(message) == {"type", "seq", "visibility", "event"}
