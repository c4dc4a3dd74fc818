"""The chat without JavaScript: the composer's plain POST starts the run, like the websocket."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient, Client

from skills_app.models import Conversation, Message, Run
from skills_app.runs import supervisor as runs
from tests.support.fake_anthropic import Reply

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def conversation(alice):
    return Conversation.objects.create(owner=alice, title="No script")


async def _client(user) -> AsyncClient:
    client = AsyncClient()
    await sync_to_async(client.force_login)(user)
    return client


async def test_posting_the_composer_starts_the_run_and_shows_the_answer_on_reload(
    alice, conversation, fake_model
):
    fake_model.enqueue(Reply.text("Answered without a script."))
    client = await _client(alice)
    url = f"/c/{conversation.pk}/"
    response = await client.post(f"{url}act/", {"action": "send", "text": "hello, plain form"})
    assert response.status_code == 302 and response["Location"] == url
    run = await Run.objects.aget(conversation=conversation)
    await runs.wait_for_run(run.pk, timeout=15)
    page = (await client.get(url)).content.decode()
    assert "hello, plain form" in page and "Answered without a script." in page
    assert fake_model.requests[-1]["messages"][-1]["content"][-1]["text"] == "hello, plain form"


async def test_a_refused_message_is_explained_on_the_page(alice, conversation):
    client = await _client(alice)
    url = f"/c/{conversation.pk}/"
    response = await client.post(f"{url}act/", {"action": "send", "text": "  "}, follow=True)
    assert "Type a message first." in response.content.decode()
    assert not await Message.objects.filter(conversation=conversation).aexists()


async def test_stop_without_a_run_says_so(alice, conversation):
    client = await _client(alice)
    response = await client.post(f"/c/{conversation.pk}/act/", {"action": "stop"}, follow=True)
    assert "Nothing is running." in response.content.decode()


async def test_another_users_conversation_is_not_found(bob, conversation):
    client = await _client(bob)
    response = await client.post(f"/c/{conversation.pk}/act/", {"action": "send", "text": "hi"})
    assert response.status_code == 404
    assert not await Run.objects.filter(conversation=conversation).aexists()


def test_anonymous_posts_go_to_the_login_page(conversation):
    response = Client().post(f"/c/{conversation.pk}/act/", {"action": "send", "text": "hi"})
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_the_form_needs_its_csrf_token(alice, conversation):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    response = client.post(f"/c/{conversation.pk}/act/", {"action": "send", "text": "hi"})
    assert response.status_code == 403
    assert not Run.objects.filter(conversation=conversation).exists()


def test_only_posts_are_actions(alice, conversation):
    client = Client()
    client.force_login(alice)
    assert client.get(f"/c/{conversation.pk}/act/").status_code == 405
