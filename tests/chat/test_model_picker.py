"""The per-conversation model picker: model (only those offered), thinking and effort, validated
on the server and sent to the model from the next message on."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from skills_app.models import Conversation, PermissionRule
from skills_app.runs import agent_setup
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import accepted, run_turn, use_fake_model, write_skills

# Only the tests that run code in other threads (async ones) need real transactions.
pytestmark = pytest.mark.django_db


@pytest.fixture
def conversation(alice):
    return Conversation.objects.create(owner=alice, title="picker")


def post(user, conversation, **data):
    client = Client()
    client.force_login(user)
    return client.post(f"/c/{conversation.pk}/settings/", data)


def test_the_chat_page_offers_the_configured_models_with_prices(alice, conversation, settings):
    settings.ANTHROPIC_MODELS = ["claude-opus-4-8", "claude-haiku-4-5"]
    client = Client()
    client.force_login(alice)
    html = client.get(f"/c/{conversation.pk}/").content.decode()
    picker = html[
        html.index('id="model-picker"') : html.index("</details>", html.index('id="model-picker"'))
    ]
    assert '<option value="claude-opus-4-8" selected>Claude Opus 4.8 · $5 in / $25 out' in picker
    assert '<option value="claude-haiku-4-5">Claude Haiku 4.5 · $1 in / $5 out' in picker
    assert "claude-sonnet-5" not in picker
    assert 'name="effort"' in picker and '<option value="max">max</option>' in picker


def test_it_saves_the_choice_without_reordering_the_list(alice, conversation):
    before = Conversation.objects.get(pk=conversation.pk).updated_at
    response = post(alice, conversation, model="claude-haiku-4-5", thinking="off", effort="low")
    assert response.status_code == 302 and response["Location"] == f"/c/{conversation.pk}/"
    saved = Conversation.objects.get(pk=conversation.pk)
    assert (saved.model, saved.thinking, saved.effort) == ("claude-haiku-4-5", False, "low")
    assert saved.updated_at == before
    config = agent_setup.agent_config(saved)
    assert (config.model, config.thinking, config.effort) == ("claude-haiku-4-5", False, "low")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"model": "claude-sonnet-5-5", "thinking": "on"}, "not a model Skillscope knows"),
        (
            {"model": "claude-fable-5", "thinking": "on"},
            "not offered here; add it to ANTHROPIC_MODELS",
        ),
        ({"model": "claude-opus-4-8", "thinking": "maybe"}, "Select a valid choice"),
        (
            {"model": "claude-opus-4-8", "thinking": "on", "effort": "extreme"},
            "Select a valid choice",
        ),
        ({"model": "<script>alert(1)</script>", "thinking": "on"}, "not a model Skillscope knows"),
    ],
)
def test_it_refuses_what_is_not_offered_and_says_why(alice, conversation, data, message):
    response = post(alice, conversation, **data)
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/plain")
    assert message in response.content.decode()
    assert Conversation.objects.get(pk=conversation.pk).model == ""


def test_nobody_else_can_change_my_conversation(bob, conversation):
    assert post(bob, conversation, model="claude-haiku-4-5", thinking="on").status_code == 404
    assert Conversation.objects.get(pk=conversation.pk).model == ""


def test_the_defaults_come_from_the_settings_until_a_pick(alice, conversation, settings):
    settings.ANTHROPIC_THINKING = False
    settings.ANTHROPIC_EFFORT = "medium"
    config = agent_setup.agent_config(conversation)
    assert (config.thinking, config.effort) == (False, "medium")
    conversation.thinking = True
    conversation.effort = "max"
    config = agent_setup.agent_config(conversation)
    assert (config.thinking, config.effort) == (True, "max")


@pytest.mark.django_db(transaction=True)
async def test_the_picked_model_thinking_and_effort_reach_the_model(
    settings, fake_anthropic, alice, conversation, tmp_path
):
    use_fake_model(settings, fake_anthropic)
    settings.SKILLS_DIRS = [write_skills(tmp_path / "skills")]
    response = await sync_to_async(post)(
        alice, conversation, model="claude-sonnet-5", thinking="on", effort="xhigh"
    )
    assert response.status_code == 302
    fake_anthropic.enqueue(Reply.text("Thought about it."))
    run = await run_turn(conversation, "think hard", alice)
    sent = accepted(fake_anthropic)[-1]
    assert run.status == "done" and run.model == "claude-sonnet-5"
    assert sent["model"] == "claude-sonnet-5"
    assert sent["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert sent["output_config"] == {"effort": "xhigh"}

    await sync_to_async(post)(
        alice, conversation, model="claude-haiku-4-5", thinking="off", effort="max"
    )
    fake_anthropic.enqueue(Reply.text("Quick."))
    await run_turn(conversation, "now quick", alice)
    sent = accepted(fake_anthropic)[-1]
    # Haiku takes no effort setting, and thinking off is its default: neither is sent.
    assert sent["model"] == "claude-haiku-4-5"
    assert "output_config" not in sent and "thinking" not in sent


@pytest.mark.django_db(transaction=True)
async def test_a_skill_model_alias_resolves_to_a_served_id(
    settings, fake_anthropic, alice, conversation, tmp_path
):
    use_fake_model(settings, fake_anthropic)
    skills = {
        "quick": """\
            ---
            name: quick
            description: Answers quickly.
            model: haiku
            ---
            QUICK-BODY
            """
    }
    settings.SKILLS_DIRS = [write_skills(tmp_path / "skills", skills)]
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill(quick)")
    fake_anthropic.enqueue(Reply.text("Fast answer."))
    run = await run_turn(conversation, "/quick go", alice)
    assert run.status == "done", run.error
    assert accepted(fake_anthropic)[-1]["model"] == "claude-haiku-4-5"
