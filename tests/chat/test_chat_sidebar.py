"""The chat sidebar: day groups, and only the viewer's own conversations (search included)."""

from __future__ import annotations

from datetime import date

import pytest
from django.test import Client

from skills_app.chat.sidebar import day_group
from skills_app.models import Conversation, QueuedMessage


def test_conversations_are_grouped_by_the_day_of_their_last_activity():
    today = date(2026, 3, 10)
    assert [day_group(date(2026, 3, d), today) for d in (10, 9, 8, 3, 2)] == [
        "Today",
        "Yesterday",
        "Previous 7 days",
        "Previous 7 days",
        "Older",
    ]


@pytest.mark.django_db
def test_the_sidebar_lists_only_the_viewers_conversations(alice, bob):
    Conversation.objects.create(owner=alice, title="alice's secret plan", last_event_seq=3)
    mine = Conversation.objects.create(owner=bob, title="bob's plan")
    client = Client()
    client.force_login(bob)
    page = client.get("/c/sidebar/", {"q": "plan", "current": str(mine.pk)}).content.decode()
    assert "bob&#x27;s plan" in page and "secret" not in page
    assert f'id="sidebar-conversation-{mine.pk}" href="/c/{mine.pk}/" aria-current="page"' in page


@pytest.mark.django_db
def test_a_conversation_nothing_was_sent_in_is_listed_only_while_open(bob):
    used = Conversation.objects.create(owner=bob, title="Used", last_event_seq=2)
    empty = Conversation.objects.create(owner=bob, title="Empty one")
    client = Client()
    client.force_login(bob)
    page = client.get("/c/sidebar/", {"current": str(used.pk)}).content.decode()
    assert "Used" in page and "Empty one" not in page
    page = client.get("/c/sidebar/", {"current": str(empty.pk)}).content.decode()
    assert "Used" in page and "Empty one" in page


@pytest.mark.django_db
def test_nobody_queues_into_or_cancels_in_someone_elses_conversation(alice, bob):
    theirs = Conversation.objects.create(owner=alice)
    queued = QueuedMessage.objects.create(conversation=theirs, author=alice, text="alice's")
    client = Client()
    client.force_login(bob)
    url = f"/c/{theirs.pk}/act/"
    assert client.post(url, {"action": "send", "text": "bob's"}).status_code == 404
    assert client.post(url, {"action": "cancel", "queued_id": queued.pk}).status_code == 404
    assert list(QueuedMessage.objects.values_list("text", "status")) == [("alice's", "pending")]
