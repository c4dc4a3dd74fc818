"""A skill's `model:` cannot buy anyone a model their policy does not offer (attack tests first).

Before groups, a personal skill with `model: claude-mythos-5` (or `fable`, `claude-opus-4-6`)
switched the turn to that model although the picker refused it: the API got those requests.
"""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from skills_app.models import Conversation, ModelCall, PermissionRule, Run, SkillInvocation
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import accepted, rows, run_turn, use_fake_model, write_skills
from tests.support.org import MODEL_SKILLS, group

pytestmark = pytest.mark.django_db(transaction=True)

OFFERED = ["claude-opus-4-8", "claude-sonnet-5", "claude-haiku-4-5"]


@pytest.fixture
def setup(settings, fake_anthropic, tmp_path):
    use_fake_model(settings, fake_anthropic)
    settings.SKILLS_DIRS = [write_skills(tmp_path / "skills", MODEL_SKILLS)]
    settings.ANTHROPIC_MODELS = OFFERED
    settings.ANTHROPIC_MODEL = "claude-opus-4-8"
    # Everyone: the two cheaper models only; a group may add more.
    settings.SKILLSCOPE_DEFAULT_MODELS = ["claude-sonnet-5", "claude-haiku-4-5"]
    PermissionRule.objects.create(behavior="allow", rule_text="Skill")
    return fake_anthropic


@pytest.fixture
def conversation(alice):
    return Conversation.objects.create(owner=alice, title="t", model="claude-sonnet-5")


@pytest.mark.parametrize(
    ("skill", "wanted"),
    [
        ("mythos-switch", "claude-mythos-5"),
        ("fable-switch", "claude-fable-5"),
        ("old-opus", "claude-opus-4-6"),
    ],
)
async def test_a_skill_cannot_switch_to_a_model_outside_the_policy(
    setup, conversation, alice, skill, wanted
):
    setup.enqueue(Reply.tool_use("Skill", {"skill": skill}), Reply.text("done"))
    run = await run_turn(conversation, "go", alice)
    assert run.status == Run.DONE
    models = [r["model"] for r in accepted(setup)]
    assert models == ["claude-sonnet-5", "claude-sonnet-5"]
    invocation = await SkillInvocation.objects.aget(skill=skill)
    assert invocation.model_refused == wanted
    assert invocation.model_override == ""
    # The person reads why in the applied-permissions record.
    record = [m for m in await sync_to_async(rows)(conversation) if m.kind == "permissions"]
    assert f"model: {wanted} refused" in record[0].content[0]["text"]


async def test_a_slash_command_cannot_switch_either(setup, conversation, alice):
    setup.enqueue(Reply.text("done"))
    await run_turn(conversation, "/mythos-switch now", alice)
    assert [r["model"] for r in accepted(setup)] == ["claude-sonnet-5"]


async def test_a_forked_skill_runs_its_subagent_on_the_turns_model(setup, conversation, alice):
    setup.enqueue(
        Reply.tool_use("Skill", {"skill": "forked-mythos"}),
        Reply.text("subagent answer"),
        Reply.text("parent done"),
    )
    await run_turn(conversation, "fork it", alice)
    assert "claude-mythos-5" not in {r["model"] for r in accepted(setup)}
    child = await Run.objects.filter(parent__isnull=False).afirst()
    assert child is not None and child.model == "claude-sonnet-5"


async def test_a_model_the_policy_offers_is_switched_to(setup, conversation, alice):
    """Positive control: the override itself still works within the policy."""
    setup.enqueue(Reply.tool_use("Skill", {"skill": "haiku-switch"}), Reply.text("done"))
    await run_turn(conversation, "go", alice)
    assert [r["model"] for r in accepted(setup)] == ["claude-sonnet-5", "claude-haiku-4-5"]
    invocation = await SkillInvocation.objects.aget(skill="haiku-switch")
    assert invocation.model_override == "claude-haiku-4-5" and invocation.model_refused == ""


async def test_a_group_that_offers_the_model_lets_the_skill_switch(
    setup, conversation, alice, settings
):
    settings.ANTHROPIC_MODELS = [*OFFERED, "claude-mythos-5"]
    research = await sync_to_async(group)("research", models=["claude-mythos-5"])
    await sync_to_async(alice.groups.add)(research)
    setup.enqueue(Reply.tool_use("Skill", {"skill": "mythos-switch"}), Reply.text("done"))
    await run_turn(conversation, "go", alice)
    assert [r["model"] for r in accepted(setup)] == ["claude-sonnet-5", "claude-mythos-5"]


async def test_a_conversation_model_no_longer_offered_ends_the_run_before_any_call(setup, alice):
    """A conversation left on Opus after the person lost it: no call is made, they are told."""
    conversation = await Conversation.objects.acreate(owner=alice, model="claude-opus-4-8")
    run = await run_turn(conversation, "hello", alice)
    assert run.status == Run.FAILED and run.error_kind == "model"
    assert accepted(setup) == []
    assert await ModelCall.objects.acount() == 0
    stored = await sync_to_async(rows)(conversation)
    assert stored[-1].kind == "error"
    assert "not offered to you" in stored[-1].content[0]["text"]
    assert "claude-sonnet-5" in stored[-1].content[0]["text"]
