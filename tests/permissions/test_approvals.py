from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async

from skills_app.models import Approval, Conversation, ConversationGrant, Run
from skills_app.permissions.approvals import ApprovalError, answer_approval
from skills_app.runs import supervisor as runs
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import accepted, use_fake_model

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fake(settings, fake_anthropic):
    use_fake_model(settings, fake_anthropic)
    settings.SKILLS_DIRS = []
    return fake_anthropic


async def pending(run_id):
    for _ in range(200):
        approval = await Approval.objects.filter(run_id=run_id, status="pending").afirst()
        if approval is not None:
            return approval
        await asyncio.sleep(0.05)
    raise AssertionError("no approval was requested")


async def answer_next(run_id, user, answer, reason=""):
    approval = await pending(run_id)
    await sync_to_async(answer_approval)(approval.pk, user.pk, answer, reason=reason)
    return approval


async def test_an_ask_waits_for_allow_once_then_runs_the_tool(fake, conversation, alice):
    fake.enqueue(Reply.tool_use("Bash", {"command": "echo approved-output"}), Reply.text("ok"))
    run = await runs.start_run(conversation.pk, "run it", user_id=alice.pk)
    approval = await pending(run.pk)
    assert (await Run.objects.aget(pk=run.pk)).status == Run.WAITING
    assert approval.call_text == "Bash(echo approved-output)"
    assert approval.reason == "default for Bash: ask"
    await sync_to_async(answer_approval)(approval.pk, alice.pk, "allow_once")
    await runs.wait_for_run(run.pk, timeout=20)
    result = accepted(fake)[1]["messages"][-1]["content"][0]
    assert "approved-output" in str(result["content"]) and not result.get("is_error")


async def test_a_denial_and_its_reason_go_back_to_the_model(fake, conversation, alice):
    fake.enqueue(Reply.tool_use("Bash", {"command": "rm -rf out"}), Reply.text("understood"))
    run = await runs.start_run(conversation.pk, "clean", user_id=alice.pk)
    await answer_next(run.pk, alice, "deny", reason="keep my outputs")
    await runs.wait_for_run(run.pk, timeout=20)
    result = accepted(fake)[1]["messages"][-1]["content"][0]
    assert result["is_error"] is True
    assert "denied by alice: keep my outputs" in result["content"]


async def test_allow_for_this_conversation_grants_only_this_conversation(fake, conversation, alice):
    fake.enqueue(Reply.tool_use("Bash", {"command": "echo one"}), Reply.text("ok"))
    run = await runs.start_run(conversation.pk, "first", user_id=alice.pk)
    await answer_next(run.pk, alice, "allow_conversation")
    await runs.wait_for_run(run.pk, timeout=20)
    grant = await ConversationGrant.objects.aget(conversation=conversation)
    assert grant.rule_text == "Bash(echo one)"
    # Same call again in this conversation: no question asked.
    fake.enqueue(Reply.tool_use("Bash", {"command": "echo one"}), Reply.text("ok"))
    run = await runs.start_run(conversation.pk, "again", user_id=alice.pk)
    await runs.wait_for_run(run.pk, timeout=20)
    assert not await Approval.objects.filter(run_id=run.pk).aexists()
    # Another conversation still asks.
    other = await Conversation.objects.acreate(owner=alice, title="other")
    fake.enqueue(Reply.tool_use("Bash", {"command": "echo one"}), Reply.text("ok"))
    run = await runs.start_run(other.pk, "there", user_id=alice.pk)
    await answer_next(run.pk, alice, "deny")
    await runs.wait_for_run(run.pk, timeout=20)


async def test_no_answer_within_the_timeout_counts_as_deny(fake, conversation, alice, settings):
    settings.APPROVAL_TIMEOUT = 1
    fake.enqueue(Reply.tool_use("Bash", {"command": "echo late"}), Reply.text("ok"))
    run = await runs.start_run(conversation.pk, "run", user_id=alice.pk)
    await runs.wait_for_run(run.pk, timeout=20)
    approval = await Approval.objects.aget(run_id=run.pk)
    assert approval.status == Approval.TIMEOUT
    result = accepted(fake)[1]["messages"][-1]["content"][0]
    assert result["is_error"] is True and "counts as denied" in result["content"]


async def test_the_first_answer_wins_and_a_second_is_told(fake, conversation, alice):
    fake.enqueue(Reply.tool_use("Bash", {"command": "echo x"}), Reply.text("ok"))
    run = await runs.start_run(conversation.pk, "run", user_id=alice.pk)
    approval = await answer_next(run.pk, alice, "allow_once")
    with pytest.raises(ApprovalError, match="already answered"):
        await sync_to_async(answer_approval)(approval.pk, alice.pk, "deny")
    await runs.wait_for_run(run.pk, timeout=20)
    assert (await Approval.objects.aget(pk=approval.pk)).status == Approval.ALLOW_ONCE


async def test_an_unknown_answer_is_refused(fake, conversation, alice):
    fake.enqueue(Reply.tool_use("Bash", {"command": "echo x"}), Reply.text("ok"))
    run = await runs.start_run(conversation.pk, "run", user_id=alice.pk)
    approval = await pending(run.pk)
    with pytest.raises(ApprovalError, match="Unknown answer"):
        await sync_to_async(answer_approval)(approval.pk, alice.pk, "maybe")
    await sync_to_async(answer_approval)(approval.pk, alice.pk, "deny")
    await runs.wait_for_run(run.pk, timeout=20)


async def test_a_skill_scoped_admin_rule_applies_only_during_that_skills_turn(
    fake, conversation, alice, settings, tmp_path
):
    from skills_app.models import PermissionRule
    from tests.support.loop_helpers import write_skills

    settings.SKILLS_DIRS = [write_skills(tmp_path / "skills")]
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill")
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Bash(date)", skill="greeter")
    fake.enqueue(
        Reply.tool_use("Skill", {"skill": "greeter"}),
        Reply.tool_use("Bash", {"command": "date"}),
        Reply.text("ok"),
    )
    run = await runs.start_run(conversation.pk, "greet", user_id=alice.pk, auto_answer="deny")
    await runs.wait_for_run(run.pk, timeout=20)
    assert not await Approval.objects.filter(run_id=run.pk).aexists()
    fake.enqueue(Reply.tool_use("Bash", {"command": "date"}), Reply.text("ok"))
    run = await runs.start_run(conversation.pk, "date again", user_id=alice.pk, auto_answer="deny")
    await runs.wait_for_run(run.pk, timeout=20)
    assert await Approval.objects.filter(run_id=run.pk, status="deny").aexists()
