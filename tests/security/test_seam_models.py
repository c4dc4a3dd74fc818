"""Model policy (#26) "as the source design" (#30): each design's request still goes through the
person's policy, whatever the design leaves out of Skillscope's machinery.

Attacks: a conversation "as the source design" of each profile, left on a model the person's
groups do not offer, or loading a skill whose `model:` asks for one (the designs ignore the
field; the policy must hold whether they do or not). Positive control: an offered model answers.
"""

from __future__ import annotations

import pytest

from skills_app.models import Conversation, ModelCall, PermissionRule, Run
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import accepted, run_turn, use_fake_model, write_skills
from tests.support.org import MODEL_SKILLS

pytestmark = pytest.mark.django_db(transaction=True)
PROFILES = ["meta-message", "tool-result", "system-prompt"]


@pytest.fixture
def setup(settings, fake_anthropic, tmp_path):
    use_fake_model(settings, fake_anthropic)
    settings.SKILLS_DIRS = [write_skills(tmp_path / "skills", MODEL_SKILLS)]
    settings.ANTHROPIC_MODELS = ["claude-opus-4-8", "claude-sonnet-5", "claude-haiku-4-5"]
    settings.ANTHROPIC_MODEL = "claude-opus-4-8"
    settings.SKILLSCOPE_DEFAULT_MODELS = ["claude-sonnet-5", "claude-haiku-4-5"]
    PermissionRule.objects.create(behavior="allow", rule_text="Skill")
    return fake_anthropic


@pytest.mark.parametrize("profile", PROFILES)
async def test_a_design_conversation_on_a_model_not_offered_calls_nothing(setup, alice, profile):
    conversation = await Conversation.objects.acreate(
        owner=alice, model="claude-opus-4-8", profile=profile, base_prompt="design"
    )
    run = await run_turn(conversation, "hello", alice)
    assert run.status == Run.FAILED and run.error_kind == "model", run.error
    assert accepted(setup) == [] and await ModelCall.objects.acount() == 0


@pytest.mark.parametrize("profile", PROFILES)
async def test_a_skills_model_asks_for_nothing_the_policy_refuses_as_the_design(
    setup, alice, profile
):
    conversation = await Conversation.objects.acreate(
        owner=alice, model="claude-sonnet-5", profile=profile, base_prompt="design"
    )
    loader = {"meta-message": "Skill", "tool-result": "load_skill", "system-prompt": "skill_load"}
    key = {"meta-message": "skill", "tool-result": "name", "system-prompt": "skill"}
    setup.enqueue(
        Reply.tool_use(loader[profile], {key[profile]: "mythos-switch"}),
        Reply.text("done"),
    )
    run = await run_turn(conversation, "use the dearest model", alice)
    assert run.status == Run.DONE, run.error
    models = {r["model"] for r in accepted(setup)}
    assert models == {"claude-sonnet-5"}, models  # positive control: the offered one answered
