"""`meta-message` judged by Claude Code's `Skill` tool as seed 003 gives it (its own code).

The oracle (`tests/support/design_oracles/claude_code.py`) loads the same skill folders the way the
article's `loadPluginSkills` does, filters them with `getSkillsForSkillTool` and formats them
with `formatSkill`; the app's request, captured by the fake Anthropic server, is compared line
by line. Where the profile follows today's Claude Code instead of the article (the input keys,
the acknowledgement, the hidden message's first line) the test pins that choice and shows the
article's form is not what is sent (docs/profiles.md says why).
"""

from __future__ import annotations

import inspect
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings as django_settings

from skills_app.core import skilltool
from skills_app.core.agent import AgentConfig
from skills_app.core.catalog import build_catalog
from skills_app.models import Conversation, Message, PermissionRule
from skills_app.workspaces import workspace_for
from tests.support.design_oracles import claude_code
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import accepted, run_turn, use_fake_model

pytestmark = pytest.mark.django_db(transaction=True)

EDGE_CASES = {
    "folded": "---\nname: folded\ndescription: >\n  Folded across\n  two lines.\n---\nFOLDED\n",
    "literal": "---\nname: literal\ndescription: |\n  Kept as\n  lines.\n---\nLITERAL\n",
    "quoted": "---\nname: quoted\ndescription: 'Single: quoted'\n---\nQUOTED\n",
    "bare": "---\nname: bare\n---\nBARE-BODY without a description\n",
    "when-only": "---\nname: when-only\nwhen_to_use: When nothing else fits.\n---\nWHEN\n",
    "focus": "---\nname: focus\ndescription: Sets a focused mode.\nmode: true\n---\nFOCUS\n",
    "perm": textwrap.dedent(
        """\
        ---
        name: perm
        description: Pre-approves echo and picks a model.
        allowed-tools: Bash(echo *)
        model: claude-haiku-4-5
        ---
        PERM-BODY for $ARGUMENTS
        """
    ),
    "toolbox/skills/pdf": "---\ndescription: A plugin's skill.\n---\nPDF-BODY\n",
}
# One line per entry: the profile collapses a literal block's line breaks where the article's
# formatSkill would keep them (a folded `>` description is one line already).
MULTI_LINE = {"literal"}


@pytest.fixture
def fake(settings, fake_anthropic, tmp_path):
    use_fake_model(settings, fake_anthropic)
    root = tmp_path / "edge"
    for folder, text in EDGE_CASES.items():
        (root / folder).mkdir(parents=True)
        (root / folder / "SKILL.md").write_text(text)
    settings.SKILLS_DIRS = [root]
    PermissionRule.objects.create(behavior="allow", rule_text="Skill")
    fake_anthropic.root = root
    return fake_anthropic


def oracle_commands(edge: Path) -> list[claude_code.Command]:
    bundled = Path(django_settings.BUNDLED_SKILLS_DIR)
    commands = [claude_code.load_skill(f) for f in sorted(bundled.glob("*/SKILL.md"))]
    for folder in EDGE_CASES:
        parts = folder.split("/")
        plugin = parts[0] if len(parts) == 3 else None
        commands.append(claude_code.load_skill(edge / folder / "SKILL.md", plugin=plugin))
    return claude_code.skills_for_skill_tool(commands)


def catalog_lines(request: dict[str, Any]) -> dict[str, str]:
    tool = next(t for t in request["tools"] if t["name"] == "Skill")
    listing = tool["description"].split("<available_skills>\n", 1)[1]
    listing = listing.split("</available_skills>", 1)[0]
    lines = [ln for ln in listing.splitlines() if ln.startswith('"')]
    return {line.split('"', 2)[1]: line for line in lines}


async def test_the_catalog_is_the_articles_filter_and_format_skill(fake, alice):
    conversation = await Conversation.objects.acreate(owner=alice, base_prompt="design")
    fake.enqueue(Reply.text("ok"))
    await run_turn(conversation, "hi", alice)
    (request,) = accepted(fake)
    assert request.system_text.startswith(claude_code.SYSTEM_PREFIX)
    sent = catalog_lines(request)
    expected = {c.name: claude_code.format_skill(c) for c in oracle_commands(fake.root)}
    assert set(sent) == set(expected)  # who is listed: the article's filter, exactly
    assert "bare" not in sent and "commit-message" not in sent
    for name, line in expected.items():
        if name in MULTI_LINE:
            assert sent[name] != line and sent[name] == " ".join(line.split())
        else:
            assert sent[name] == line, name
    assert sent["toolbox:pdf"] == '"toolbox:pdf": A plugin\'s skill. (plugin:toolbox)'
    # Mode commands come first, under their own heading (the article names the section only).
    tool = next(t for t in request["tools"] if t["name"] == "Skill")
    assert '<available_skills>\nMode Commands:\n"focus": ' in tool["description"]


async def test_invoking_follows_todays_claude_code_where_the_article_differs(fake, alice):
    conversation = await Conversation.objects.acreate(owner=alice, base_prompt="design")
    fake.enqueue(
        # The article's input, {command: NAME}, is still accepted.
        Reply.tool_use("Skill", {"command": "release-notes"}),
        Reply.tool_use("Skill", {"skill": "perm", "args": "Ada"}),
        Reply.text("ok"),
    )
    await run_turn(conversation, "go", alice)
    _, first, second = accepted(fake)
    result, status, hidden = first["messages"][-1]["content"][:3]
    # The acknowledgement is today's text, not the article's {success, commandName} object.
    assert result["content"] == "Launching skill: release-notes"
    assert result["content"] != json.dumps(claude_code.tool_output("release-notes"))
    # The visible metadata message: the article's join, byte for byte.
    assert status["text"] == claude_code.metadata("release-notes")
    staged = (await sync_to_async(workspace_for)(conversation.pk)).skills_dir / "release-notes"
    assert hidden["text"].startswith(f"Base directory for this skill: {staged}\n\n# Writing")
    perm_status = second["messages"][-1]["content"][1]
    assert perm_status["text"] == claude_code.metadata("perm", "Ada")
    # Stored, never sent: the command_permissions record (the API takes no such message).
    assert "allowed-tools" not in json.dumps(second["messages"])
    stored = Message.objects.filter(conversation=conversation, kind="permissions")
    record = await stored.aget()
    assert record.to_model is False and "Bash(echo *)" in record.content[0]["text"]
    # Claude Code's execution context applies: the skill's model, for the rest of the turn.
    assert first["model"] != "claude-haiku-4-5" and second["model"] == "claude-haiku-4-5"


def test_the_oracles_validation_matches_the_profiles_refusals():
    """The five error codes of `validateInput`, as the profile's validation answers them."""
    commands = {"manual": claude_code.Command("manual", "d", None, True, True, False, "")}
    assert claude_code.validate_input(" /", commands) == 1
    assert claude_code.validate_input("nope", commands) == 2
    assert claude_code.validate_input("/manual", commands) == 4
    with pytest.raises(skilltool.SkillInvocationError) as empty:
        skilltool.validate_invocation("", caller="model", lookup=lambda n: None)
    assert empty.value.code == skilltool.EMPTY_NAME
    with pytest.raises(skilltool.SkillInvocationError) as unknown:
        skilltool.validate_invocation("nope", caller="model", lookup=lambda n: None)
    assert unknown.value.code == skilltool.UNKNOWN_SKILL
    assert skilltool.skill_call_input({"command": "/manual"}) == ("manual", "")


def test_the_catalog_budget_is_the_articles_default():
    """003: "subject to a token budget limit of 15,000 characters by default"."""
    assert AgentConfig(model="m").catalog_budget == 15_000
    assert django_settings.SKILL_CATALOG_BUDGET == 15_000
    assert inspect.signature(build_catalog).parameters["budget"].default == 15_000
