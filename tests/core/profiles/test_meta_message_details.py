"""The `meta-message` details of seed 003, through a whole run: `{baseDir}`, a plugin skill's
source suffix, description-less skills left out, "Mode Commands", a skill's effort for its turn."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from skills_app.models import Approval, Conversation, PermissionRule
from skills_app.workspaces import workspace_for
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import accepted, run_turn, use_fake_model, write_skills

pytestmark = pytest.mark.django_db(transaction=True)

SKILLS = {
    "thinker": """\
        ---
        name: thinker
        description: Thinks briefly.
        effort: low
        allowed-tools: Bash(python3 {baseDir}/run.py)
        ---
        Run python3 {baseDir}/run.py and report.
        """,
    "quiet": """\
        ---
        name: quiet
        ---
        A skill whose first paragraph would have been its description.
        """,
    "focus": """\
        ---
        name: focus
        description: Sets a focused working mode.
        mode: true
        ---
        FOCUS-BODY
        """,
}


@pytest.fixture
def fake(settings, fake_anthropic, tmp_path):
    use_fake_model(settings, fake_anthropic)
    root = write_skills(tmp_path / "skills", SKILLS)
    (root / "thinker" / "run.py").write_text("print('thought')\n")
    plugin = root / "toolbox" / "skills" / "pdf"
    plugin.mkdir(parents=True)
    (plugin / "SKILL.md").write_text("---\ndescription: Extracts text.\n---\nPDF-BODY\n")
    settings.SKILLS_DIRS = [root]
    settings.BUNDLED_SKILLS_DIR = tmp_path / "no-bundled"
    settings.ANTHROPIC_EFFORT = ""
    PermissionRule.objects.create(behavior="allow", rule_text="Skill")
    return fake_anthropic


async def test_the_catalog_shows_modes_plugins_and_leaves_out_undescribed_skills(fake, alice):
    conversation = await Conversation.objects.acreate(owner=alice)
    fake.enqueue(Reply.text("ok"))
    await run_turn(conversation, "hi", alice)
    catalog = next(t for t in accepted(fake)[0]["tools"] if t["name"] == "Skill")["description"]
    listing = catalog.split("<available_skills>\n", 1)[1]
    assert listing == (
        "Mode Commands:\n"
        '"focus": Sets a focused working mode.\n'
        "\n"
        "Skills:\n"
        '"thinker": Thinks briefly.\n'
        '"toolbox:pdf": Extracts text. (plugin:toolbox)\n'
        "</available_skills>"
    )


async def test_base_dir_resolves_in_the_body_and_in_allowed_tools(fake, alice):
    conversation = await Conversation.objects.acreate(owner=alice)
    staged = (await sync_to_async(workspace_for)(conversation.pk)).skills_dir / "thinker"
    fake.enqueue(
        Reply.tool_use("Skill", {"skill": "thinker"}),
        Reply.tool_use("Bash", {"command": f"python3 {staged}/run.py"}),
        Reply.text("thought"),
    )
    # "deny": an approval would fail the command, so success proves the rule pre-approved it.
    await run_turn(conversation, "think", alice, answer="deny")
    sent = accepted(fake)
    assert f"Run python3 {staged}/run.py and report." in str(sent[1]["messages"])
    assert "{baseDir}" not in str(sent[1]["messages"])
    assert "thought" in str(sent[2]["messages"][-1]["content"][0]["content"])
    assert not await Approval.objects.filter(conversation=conversation).aexists()


async def test_a_skills_effort_applies_for_the_rest_of_its_turn(fake, alice):
    conversation = await Conversation.objects.acreate(owner=alice)
    fake.enqueue(
        Reply.tool_use("Skill", {"skill": "thinker"}),
        Reply.text("done"),
        Reply.text("next turn"),
    )
    await run_turn(conversation, "think", alice)
    await run_turn(conversation, "and now?", alice)
    sent = accepted(fake)
    efforts = [r.get("output_config", {}).get("effort") for r in sent]
    assert efforts == [None, "low", None]
