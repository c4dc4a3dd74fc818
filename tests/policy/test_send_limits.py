"""The limits on starting runs are asked once per start, in the transaction that creates the runs,
whichever entrance starts them: a send, an edit, a regeneration, a comparison (three runs, one
question). Counted with a spy inside the one policy function (`policy.limits.check_send`); the
refusals themselves, and what they leave untouched, are tested at each entrance (chat queue,
compare, MCP prompts)."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from skills_app.chat import actions
from skills_app.models import Message, PermissionRule, Run
from skills_app.policy import limits
from skills_app.runs import supervisor
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import use_fake_model, write_skills

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def asked(monkeypatch) -> list[int]:
    """Whom the limits were asked about, once per check: `check_send` asks `account_barred`
    first, as the module's own name, however its callers imported `check_send`."""
    calls: list[int] = []
    real = limits.account_barred

    def spy(user_id: int) -> str:
        calls.append(user_id)
        return real(user_id)

    monkeypatch.setattr(limits, "account_barred", spy)
    return calls


async def _settled() -> None:
    for _ in range(400):
        if not await Run.objects.filter(status__in=Run.ACTIVE).aexists():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("runs still active")


async def _act(conversation, user, action: str, **fields) -> None:
    await actions.perform(
        action, {"action": action, **fields}, conversation_id=conversation.pk, user_id=user.pk
    )


async def test_each_chat_action_that_starts_a_run_asks_the_limits_once(
    settings, fake_anthropic, conversation, alice, asked
):
    use_fake_model(settings, fake_anthropic, retries=0)
    fake_anthropic.enqueue(Reply.text("one"), Reply.text("two"), Reply.text("three"))
    await _act(conversation, alice, "send", text="a question")
    await _settled()
    assert asked == [alice.pk]
    question = await Message.objects.aget(conversation=conversation, role="user")
    await _act(conversation, alice, "edit", message_id=question.pk, text="a better question")
    await _settled()
    assert asked == [alice.pk] * 2
    await _act(conversation, alice, "regenerate")
    await _settled()
    assert asked == [alice.pk] * 3
    assert await Run.objects.filter(conversation=conversation, status=Run.DONE).acount() == 3


async def test_a_comparison_asks_the_limits_once_for_its_three_runs(
    settings, tmp_path, auditor, asked
):
    settings.SKILLS_DIRS = [write_skills(tmp_path / "skills")]
    settings.MODEL_CLIENT = "tests.support.loop_helpers.instant_demo_client"
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill")
    client = AsyncClient()
    await sync_to_async(client.force_login)(auditor)
    response = await client.post("/compare/start/", {"prompt": "hello", "skills": ["greeter"]})
    assert response.status_code == 302
    await _settled()
    assert asked == [auditor.pk]
    assert await Run.objects.acount() == 3
    await supervisor.drain()
