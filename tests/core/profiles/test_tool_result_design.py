"""The `tool-result` profile (learn-claude-code s05, seed 001) under "same base prompt", and how
"as the source design" reads the same skills. The byte-for-byte judge of design mode, the
design's own code, is in `test_design_tool_result.py`."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async

from skills_app.chat.presenters import message_plain_text
from skills_app.models import Approval, Conversation, PermissionRule, SkillInvocation
from skills_app.workspaces import workspace_for
from tests.support.fake_anthropic import Reply, without_cache_control
from tests.support.loop_helpers import accepted, rows, run_turn, use_fake_model, write_skills

pytestmark = pytest.mark.django_db(transaction=True)

SKILLS = {
    "greeter": """\
        ---
        name: greeter
        description: Greets someone by name.
        tags: social, words
        ---

        GREETER-BODY: greet $ARGUMENTS warmly from ${CLAUDE_SKILL_DIR}.

        """,
    "folder-name": """\
        ---
        name: nice-name
        description: Its frontmatter name is not its folder's.
        ---
        NICE-BODY
        """,
    "bad-name": """\
        ---
        name: Not Valid
        ---
        BAD-NAME-BODY
        """,
}
LOAD_SKILL = {
    "name": "load_skill",
    "description": "Load specialized knowledge by name.",
    "input_schema": {
        "type": "object",
        "properties": {"name": {"type": "string", "description": "Skill name to load"}},
        "required": ["name"],
    },
}
BODY = "GREETER-BODY: greet $ARGUMENTS warmly from ${CLAUDE_SKILL_DIR}."


@pytest.fixture
def fake(settings, fake_anthropic, tmp_path):
    use_fake_model(settings, fake_anthropic)
    settings.SKILLS_DIRS = [write_skills(tmp_path / "skills", SKILLS)]
    settings.BUNDLED_SKILLS_DIR = tmp_path / "no-bundled"
    return fake_anthropic


def conversation_for(alice, **fields):
    return Conversation.objects.create(owner=alice, profile="tool-result", **fields)


async def test_as_the_design_the_catalog_is_the_naive_readers(fake, alice):
    conversation = await sync_to_async(conversation_for)(alice, base_prompt="design")
    fake.enqueue(Reply.text("ok"))
    await run_turn(conversation, "hi", alice)
    request = accepted(fake)[0]
    root = (await sync_to_async(workspace_for)(conversation.pk)).root
    assert request.system_text == (
        f"You are a coding agent at {root}.\n"
        "Use load_skill to access specialized knowledge before tackling unfamiliar topics.\n"
        "\n"
        "Skills available:\n"
        "  - Not Valid: No description\n"
        "  - nice-name: Its frontmatter name is not its folder's.\n"
        "  - greeter: Greets someone by name. [social, words]"
    )
    load = next(t for t in request["tools"] if t["name"] == "load_skill")
    assert {k: v for k, v in load.items() if k != "cache_control"} == LOAD_SKILL


async def test_under_the_same_base_prompt_names_are_checked_and_descriptions_parsed(fake, alice):
    conversation = await sync_to_async(conversation_for)(alice)
    fake.enqueue(Reply.text("ok"))
    await run_turn(conversation, "hi", alice)
    request = accepted(fake)[0]
    assert request.system_text.endswith(
        "Skills available:\n"
        "  - bad-name: No description\n"
        "  - nice-name: Its frontmatter name is not its folder's.\n"
        "  - greeter: Greets someone by name. [social, words]"
    )
    names = [t["name"] for t in request["tools"]]
    assert names == ["Read", "Write", "Edit", "Glob", "Grep", "Bash", "load_skill"]


async def test_load_skill_returns_the_body_as_written_in_the_skill_block(fake, alice):
    conversation = await sync_to_async(conversation_for)(alice)
    fake.enqueue(Reply.tool_use("load_skill", {"name": "greeter"}), Reply.text("ok"))
    await run_turn(conversation, "greet", alice)
    result = without_cache_control(accepted(fake)[1]["messages"][-1]["content"][0])
    assert result == {
        "type": "tool_result",
        "tool_use_id": result["tool_use_id"],
        "content": f'<skill name="greeter">\n{BODY}\n</skill>',
    }


async def test_an_admin_may_turn_substitutions_on(fake, alice, settings):
    settings.TOOL_RESULT_SUBSTITUTIONS = True
    conversation = await sync_to_async(conversation_for)(alice)
    fake.enqueue(Reply.tool_use("load_skill", {"name": "greeter"}), Reply.text("ok"))
    await run_turn(conversation, "greet", alice)
    content = accepted(fake)[1]["messages"][-1]["content"][0]["content"]
    staged = (await sync_to_async(workspace_for)(conversation.pk)).skills_dir / "greeter"
    assert (
        content == f'<skill name="greeter">\nGREETER-BODY: greet  warmly from {staged}.\n</skill>'
    )
    assert "Base directory" not in content


async def test_skillscopes_form_names_a_skill_by_its_valid_frontmatter_name(fake, alice):
    conversation = await sync_to_async(conversation_for)(alice)
    fake.enqueue(
        Reply.tool_use("load_skill", {"name": "folder-name"}),
        Reply.tool_use("load_skill", {"name": "nice-name"}),
        Reply.tool_use("load_skill", {"name": "bad-name"}),
        Reply.text("ok"),
    )
    await run_turn(conversation, "go", alice)
    sent = accepted(fake)
    by_folder = sent[1]["messages"][-1]["content"][0]["content"]
    assert by_folder.startswith("Error: Unknown skill 'folder-name'. Available: ")
    assert sent[2]["messages"][-1]["content"][0]["content"] == (
        '<skill name="nice-name">\nNICE-BODY\n</skill>'
    )
    assert sent[3]["messages"][-1]["content"][0]["content"] == (
        '<skill name="bad-name">\nBAD-NAME-BODY\n</skill>'
    )
    # The audit names the skill by its command (folder) name.
    audited = [i.skill async for i in SkillInvocation.objects.filter(conversation=conversation)]
    assert sorted(audited) == ["bad-name", "folder-name"]


async def test_loading_needs_no_approval_unless_an_admin_rule_asks(fake, alice):
    conversation = await sync_to_async(conversation_for)(alice)
    fake.enqueue(Reply.tool_use("load_skill", {"name": "greeter"}), Reply.text("ok"))
    # "deny": any approval would fail the load, so a success proves none was asked.
    await run_turn(conversation, "greet", alice, answer="deny")
    assert accepted(fake)[1]["messages"][-1]["content"][0]["content"].startswith("<skill ")
    assert not await Approval.objects.filter(conversation=conversation).aexists()

    await PermissionRule.objects.acreate(behavior="ask", rule_text="Skill(greeter)")
    fake.enqueue(Reply.tool_use("load_skill", {"name": "greeter"}), Reply.text("ok"))
    await run_turn(conversation, "again", alice, answer="deny")
    asked = [a async for a in Approval.objects.filter(conversation=conversation)]
    assert [a.tool for a in asked] == ["load_skill"]
    refused = accepted(fake)[-1]["messages"][-1]["content"][0]
    assert refused["content"].startswith("Error: ") and "is_error" not in refused


async def test_a_slash_command_delivers_what_the_user_typed_and_the_skill_block(fake, alice):
    conversation = await sync_to_async(conversation_for)(alice)
    fake.enqueue(Reply.text("Hello, Ada!"))
    await run_turn(conversation, "/greeter Ada", alice)
    (request,) = accepted(fake)
    assert request["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "/greeter Ada"},
                {
                    "type": "text",
                    "text": f'<skill name="greeter">\n{BODY}\n</skill>',
                    "cache_control": {"type": "ephemeral"},
                },
            ],
        }
    ]
    stored = await sync_to_async(rows)(conversation)
    chip = next(m for m in stored if m.kind == "skill_status")
    assert not chip.is_meta and chip.meta == {"skill": "greeter", "args": "Ada"}
    # The terminal shows it as the chip it is, named from its meta.
    assert message_plain_text(chip) == '[skill] The "greeter" skill is loading (args: Ada)'
    visible = json.dumps([m.content for m in stored if not m.is_meta])
    assert "GREETER-BODY" not in visible
