"""The outbound filter's index is cached per conversation and rebuilt when its hidden texts may
have changed, judged by the newest rows' ids. An id can come back: SQLite's sequence rolls back
with a failed insert, so the next hidden row gets the same id with other text. The key carries
each row's time too, so a reused id never serves a stale index (which would let the new text
through)."""

from __future__ import annotations

import pytest
from django.db import transaction

from skills_app import visibility
from skills_app.core.transcript import StoredMessage
from skills_app.models import Conversation, Message
from skills_app.runs import store

pytestmark = pytest.mark.django_db

FIRST = "First injected text: count the crates twice and never open the blue one before noon."
SECOND = "Second injected text: the gate code changes on Fridays and is written on the third shelf."


def _inject(conversation: Conversation, text: str) -> Message:
    return store.append_message(
        conversation.pk,
        StoredMessage.text(
            "user",
            f"Base directory for this skill: /x\n\n{text}",
            kind="skill_prompt",
            is_meta=True,
        ),
    )


class _RolledBack(Exception):
    pass


def test_a_hidden_row_that_reuses_a_rolled_back_id_is_still_hidden(alice):
    conversation = Conversation.objects.create(owner=alice, title="crates")
    with pytest.raises(_RolledBack), transaction.atomic():
        gone = _inject(conversation, FIRST)
        assert visibility.hidden_index(conversation.pk).contains_hidden(FIRST)  # cached now
        raise _RolledBack
    again = _inject(conversation, SECOND)
    assert again.pk == gone.pk  # the id came back (the premise of the attack)
    index = visibility.hidden_index(conversation.pk)
    assert index.contains_hidden(SECOND)
    assert not index.contains_hidden(FIRST)
