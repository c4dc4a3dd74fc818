"""A conversation that outgrows the model's context window: the request is not sent, the user is
told with the figures and offered a new conversation that carries a summary made by the model."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient, Client

from skills_app.core.summary import OMITTED, SUMMARY_SYSTEM, summary_request
from skills_app.core.transcript import EXCLUDED, StoredMessage
from skills_app.models import Conversation, Message, ModelCall, PermissionRule, Run
from skills_app.runs import store
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import accepted, rows, run_turn

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def haiku(alice):
    """A conversation on claude-haiku-4-5, whose window is 200,000 tokens."""
    return Conversation.objects.create(owner=alice, title="Long one", model="claude-haiku-4-5")


def fill(conversation: Conversation, chars: int) -> None:
    store.append_message(conversation.pk, StoredMessage.text("user", "LONG-START " + "x" * chars))
    store.append_message(conversation.pk, StoredMessage.text("assistant", "Noted."))


async def test_a_request_over_the_window_is_not_sent_and_the_user_is_told_the_figures(
    fake, haiku, alice
):
    await sync_to_async(fill)(haiku, 900_000)
    run = await run_turn(haiku, "and now?", alice)
    assert run.status == Run.FAILED and run.error_kind == "context_window"
    assert fake.requests == []  # nothing was sent
    notice = (await sync_to_async(rows)(haiku))[-1]
    text = notice.content[0]["text"]
    assert notice.kind == "error" and notice.meta["offer_new_conversation"] is True
    assert "200,000-token context window of Claude Haiku 4.5; it was not sent" in text
    assert f"about {notice.meta['tokens']:,} tokens" in text and notice.meta["tokens"] > 200_000
    client = Client()
    await sync_to_async(client.force_login)(alice)
    html = (await sync_to_async(client.get)(f"/c/{haiku.pk}/")).content.decode()
    assert f'href="/c/{haiku.pk}/summarise/"' in html


async def test_a_request_near_the_window_is_sent_with_a_warning(fake, haiku, alice):
    await sync_to_async(fill)(haiku, 720_000)
    fake.enqueue(Reply.text("Still fits."))
    run = await run_turn(haiku, "go on", alice)
    assert run.status == Run.DONE and len(accepted(fake)) == 1
    stored = await sync_to_async(rows)(haiku)
    warning = next(m for m in stored if m.meta.get("code") == "context_near")
    assert "of the 200,000-token context window of Claude Haiku 4.5" in warning.content[0]["text"]
    assert stored[-1].content[0]["text"] == "Still fits."


async def test_the_api_saying_too_long_offers_the_summary_and_leaves_the_turn_out(
    fake, haiku, alice
):
    fake.enqueue(Reply.error(400, "invalid_request_error", "prompt is too long: 201000 tokens"))
    run = await run_turn(haiku, "hello", alice)
    assert run.error_kind == "context_window"
    stored = await sync_to_async(rows)(haiku)
    assert stored[0].meta[EXCLUDED] == "failed"
    assert stored[-1].meta["offer_new_conversation"] is True
    assert "longer than the context window of Claude Haiku 4.5" in stored[-1].content[0]["text"]


async def test_the_summary_carries_only_visible_text_into_the_new_conversation(fake, alice, haiku):
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill(greeter)")
    fake.enqueue(Reply.text("Hello Ann, sunny today."))
    await run_turn(haiku, "/greeter Ann", alice)
    assert "GREETER-BODY-MARKER" in json.dumps(accepted(fake)[-1])  # the model did get it

    fake.enqueue(Reply.text("The user greeted Ann; the assistant answered."))
    client = AsyncClient()
    await sync_to_async(client.force_login)(alice)
    confirm = await client.get(f"/c/{haiku.pk}/summarise/")
    assert confirm.status_code == 200 and b"Summarise and start" in confirm.content
    response = await client.post(f"/c/{haiku.pk}/summarise/")
    assert response.status_code == 302

    request = accepted(fake)[-1]
    sent = json.dumps(request, ensure_ascii=False)
    assert request["system"] == SUMMARY_SYSTEM and request["model"] == "claude-haiku-4-5"
    assert "GREETER-BODY-MARKER" not in sent and "Base directory" not in sent
    assert '[The \\"greeter\\" skill was loaded (Ann).]' in sent
    assert "Hello Ann, sunny today." in sent

    new = await Conversation.objects.exclude(pk=haiku.pk).aget()
    assert response["Location"] == f"/c/{new.pk}/"
    assert (new.owner_id, new.model, new.profile) == (alice.pk, "claude-haiku-4-5", haiku.profile)
    seed = await Message.objects.aget(conversation=new)
    assert "The user greeted Ann; the assistant answered." in seed.content[0]["text"]
    assert seed.meta["summary_of"] == haiku.pk
    call = await ModelCall.objects.aget(purpose=ModelCall.SUMMARY)
    assert call.conversation_id == haiku.pk and call.run_id is None and call.cost_usd > 0

    fake.enqueue(Reply.text("Let's go on."))
    await run_turn(new, "where were we?", alice)
    first = accepted(fake)[-1]["messages"][0]["content"]
    assert "The user greeted Ann" in first[0]["text"] and first[-1]["text"] == "where were we?"


async def test_the_demo_model_makes_a_deterministic_summary(settings, alice):
    settings.MODEL_CLIENT = "tests.support.loop_helpers.instant_demo_client"
    settings.SKILLS_DIRS = []
    old = await Conversation.objects.acreate(owner=alice, title="demo")
    await run_turn(old, "first question", alice)
    await run_turn(old, "second question", alice)
    client = AsyncClient()
    await sync_to_async(client.force_login)(alice)
    await client.post(f"/c/{old.pk}/summarise/")
    seed = await Message.objects.exclude(conversation=old).aget()
    text = seed.content[0]["text"]
    assert "The user wrote 2 messages." in text
    assert "First message: “first question”" in text and "Last message: “second question”" in text
    call = await ModelCall.objects.aget(purpose=ModelCall.SUMMARY)
    assert call.is_demo and call.cost_usd is None
    html = (await client.get(f"/c/{seed.conversation_id}/")).content.decode()
    assert "Summary of <a href=" in html


async def test_nobody_else_can_summarise_my_conversation(fake, haiku, bob):
    client = AsyncClient()
    await sync_to_async(client.force_login)(bob)
    assert (await client.get(f"/c/{haiku.pk}/summarise/")).status_code == 404
    assert (await client.post(f"/c/{haiku.pk}/summarise/")).status_code == 404
    assert fake.requests == [] and await Conversation.objects.acount() == 1


async def test_summaries_count_against_the_sending_limit(fake, haiku, alice, settings):
    settings.RATE_LIMIT_MESSAGES_PER_MINUTE = 1
    fake.enqueue(Reply.text("Summary one."))
    client = AsyncClient()
    await sync_to_async(client.force_login)(alice)
    assert (await client.post(f"/c/{haiku.pk}/summarise/")).status_code == 302
    refused = await client.post(f"/c/{haiku.pk}/summarise/")
    assert refused.status_code == 429 and b"limit is 1" in refused.content
    assert len(fake.requests) == 1


async def test_a_failed_summary_says_why_and_starts_nothing(fake, haiku, alice):
    fake.enqueue(Reply.error(500, "api_error", "boom", headers={"x-should-retry": "false"}))
    client = AsyncClient()
    await sync_to_async(client.force_login)(alice)
    response = await client.post(f"/c/{haiku.pk}/summarise/")
    assert response.status_code == 502 and b"internal error" in response.content
    assert await Conversation.objects.acount() == 1
    call = await ModelCall.objects.aget(purpose=ModelCall.SUMMARY)
    assert call.error_kind == "server"


def test_a_long_transcript_is_cut_from_the_start_to_fit_the_window():
    rows = [
        StoredMessage.text("user", "LONG-START " + "x" * 900_000),
        StoredMessage.text("assistant", "Noted."),
        StoredMessage.text("user", "the last question"),
    ]
    request = summary_request(rows, model="claude-haiku-4-5", title="t")
    text = request.messages[0]["content"][0]["text"]
    assert OMITTED in text and "LONG-START" not in text
    assert text.rstrip().endswith("User: the last question\n</transcript>")
    assert 400_000 <= len(text) < 401_000  # half of Haiku's 200,000-token window, 4 chars each
