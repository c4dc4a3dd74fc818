"""A deleted conversation is closed: a tab left open on it cannot rewrite its transcript.

Deleting hides a conversation from its owner and keeps every row for the audit as it was. A
websocket opened before the deletion is still connected, so its edit and regenerate must be
refused without marking any row replaced or appending anything to the event log.
"""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from skills_app.chat import actions
from skills_app.chat import conversations as conv
from skills_app.chat.actions import ActionError
from skills_app.core.transcript import EXCLUDED, StoredMessage
from skills_app.models import Conversation, Message, RunEvent
from skills_app.runs import store

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def deleted(alice, settings):
    settings.RATE_LIMIT_MESSAGES_PER_MINUTE = 1000
    conversation = Conversation.objects.create(owner=alice)
    store.append_message(conversation.pk, StoredMessage.text("user", "a question"))
    store.append_message(conversation.pk, StoredMessage.text("assistant", "an answer"))
    conv.delete_conversation(conversation, alice)
    return conversation


@pytest.mark.parametrize("action", ["edit", "regenerate"])
async def test_a_deleted_conversation_is_not_edited_or_regenerated(deleted, alice, action):
    first = await Message.objects.aget(conversation=deleted, role="user")
    events = await RunEvent.objects.filter(conversation=deleted).acount()
    fields = {"action": action, "message_id": first.pk, "text": "rewritten"}
    with pytest.raises(ActionError, match="deleted"):
        await actions.perform(action, fields, conversation_id=deleted.pk, user_id=alice.pk)
    assert not await Message.objects.filter(conversation=deleted, meta__has_key=EXCLUDED).aexists()
    assert await RunEvent.objects.filter(conversation=deleted).acount() == events
    rows = await sync_to_async(list)(Message.objects.filter(conversation=deleted))
    assert len(rows) == 2


def test_a_deleted_conversation_is_neither_summarised_nor_reconfigured(deleted, alice):
    from tests.security.helpers import client_of

    client = client_of(alice)
    assert client.get(f"/c/{deleted.pk}/summarise/").status_code == 404
    assert client.post(f"/c/{deleted.pk}/summarise/").status_code == 404
    settings_url = f"/c/{deleted.pk}/settings/"
    assert client.post(settings_url, {"model": "x", "thinking": "on"}).status_code == 404
    assert Conversation.objects.filter(owner=alice).count() == 1  # no summary started


def test_the_plain_form_post_refuses_a_deleted_conversation(deleted, alice):
    from tests.security.helpers import client_of

    response = client_of(alice).post(f"/c/{deleted.pk}/act/", {"action": "regenerate"})
    assert response.status_code == 404
