"""Seed 000's hook contract in every profile: PreToolUse and PostToolUse see every skill call
(Skill, load_skill, skill_*) with the skill's name and arguments; a block or a refusal skips
the call *and* the post event, and answers with the error."""

from __future__ import annotations

from typing import Any

import pytest

from skills_app.core.hooks import HookResult
from skills_app.models import Conversation, PermissionRule, SkillInvocation
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import accepted, run_turn, use_fake_model, write_skills

pytestmark = pytest.mark.django_db(transaction=True)

SEEN: list[tuple[str, dict[str, Any]]] = []
BLOCKED_TOOLS: set[str] = set()


def record_pre(payload: dict[str, Any]) -> HookResult | None:
    SEEN.append(("PreToolUse", payload))
    if payload["tool_name"] in BLOCKED_TOOLS:
        return HookResult(block=True, reason=f"no {payload['tool_name']} today")
    return None


def record_post(payload: dict[str, Any]) -> None:
    SEEN.append(("PostToolUse", payload))


@pytest.fixture
def fake(settings, fake_anthropic, tmp_path):
    use_fake_model(settings, fake_anthropic)
    settings.SKILLS_DIRS = [write_skills(tmp_path / "skills")]
    settings.AGENT_HOOKS = {
        "UserPromptSubmit": [],
        "PreToolUse": ["tests.core.profiles.test_skill_call_hooks.record_pre"],
        "PostToolUse": ["tests.core.profiles.test_skill_call_hooks.record_post"],
        "Stop": [],
    }
    SEEN.clear()
    BLOCKED_TOOLS.clear()
    PermissionRule.objects.create(behavior="allow", rule_text="Skill")
    return fake_anthropic


def events() -> list[tuple[str, str, str, str]]:
    return [(e, p["tool_name"], p.get("skill", "-"), p.get("args", "-")) for e, p in SEEN]


LOADS = [
    ("meta-message", "Skill", {"skill": "greeter", "args": "Ada"}, "Ada"),
    ("tool-result", "load_skill", {"name": "greeter"}, ""),
    ("system-prompt", "skill_load", {"skill": "greeter", "args": "Ada"}, "Ada"),
]


@pytest.mark.parametrize(("profile", "tool", "tool_input", "args"), LOADS)
async def test_pre_and_post_hooks_see_a_skill_call_with_its_name_and_args(
    fake, alice, profile, tool, tool_input, args
):
    conversation = await Conversation.objects.acreate(owner=alice, profile=profile)
    fake.enqueue(Reply.tool_use(tool, tool_input), Reply.text("ok"))
    await run_turn(conversation, "greet Ada", alice)
    assert events() == [
        ("PreToolUse", tool, "greeter", args),
        ("PostToolUse", tool, "greeter", args),
    ]
    post = SEEN[1][1]
    assert post["result"].is_error is False and post["tool_input"] == tool_input
    # The real result the model got, also where it carries the body on a hidden row.
    sent = accepted(fake)[1]["messages"][-1]["content"][0]
    assert sent["type"] == "tool_result" and post["result"].content == sent["content"]


@pytest.mark.parametrize("base_prompt", ["shared", "design"])
async def test_post_tool_use_gets_load_skills_real_result_with_the_body(fake, alice, base_prompt):
    """Hooks are trusted server-side code: they see what the model sees (issue 30)."""
    conversation = await Conversation.objects.acreate(
        owner=alice, profile="tool-result", base_prompt=base_prompt
    )
    fake.enqueue(Reply.tool_use("load_skill", {"name": "greeter"}), Reply.text("ok"))
    await run_turn(conversation, "greet Ada", alice)
    post = SEEN[1][1]
    assert post["result"].content.startswith('<skill name="greeter">\n')
    assert "GREETER-BODY-MARKER" in post["result"].content
    assert post["result"].content == accepted(fake)[1]["messages"][-1]["content"][0]["content"]


@pytest.mark.parametrize(("profile", "tool", "tool_input", "args"), LOADS)
async def test_a_blocked_skill_call_loads_nothing_and_has_no_post_event(
    fake, alice, profile, tool, tool_input, args
):
    BLOCKED_TOOLS.add(tool)
    conversation = await Conversation.objects.acreate(owner=alice, profile=profile)
    fake.enqueue(Reply.tool_use(tool, tool_input), Reply.text("ok"))
    await run_turn(conversation, "greet Ada", alice)
    result = accepted(fake)[1]["messages"][-1]["content"][0]
    assert result["is_error"] is True and result["content"] == f"Blocked by a hook: no {tool} today"
    assert events() == [("PreToolUse", tool, "greeter", args)]
    assert not await SkillInvocation.objects.filter(conversation=conversation).aexists()
    assert "GREETER-BODY-MARKER" not in str(accepted(fake)[1])


@pytest.mark.parametrize(("profile", "tool", "tool_input", "args"), LOADS)
async def test_a_skill_call_the_rules_deny_has_no_post_event(
    fake, alice, profile, tool, tool_input, args
):
    await PermissionRule.objects.acreate(behavior="deny", rule_text="Skill(greeter)")
    conversation = await Conversation.objects.acreate(owner=alice, profile=profile)
    fake.enqueue(Reply.tool_use(tool, tool_input), Reply.text("ok"))
    await run_turn(conversation, "greet Ada", alice)
    result = accepted(fake)[1]["messages"][-1]["content"][0]
    assert "Skill(greeter)" in result["content"]
    assert events() == [("PreToolUse", tool, "greeter", args)]


async def test_a_failed_invocation_that_was_not_refused_still_has_its_post_event(fake, alice):
    conversation = await Conversation.objects.acreate(owner=alice, profile="meta-message")
    fake.enqueue(Reply.tool_use("Skill", {"skill": "no-such-skill"}), Reply.text("ok"))
    await run_turn(conversation, "go", alice)
    assert [e[:3] for e in events()] == [
        ("PreToolUse", "Skill", "no-such-skill"),
        ("PostToolUse", "Skill", "no-such-skill"),
    ]
    assert SEEN[1][1]["result"].is_error is True


async def test_skill_run_is_a_skill_call_and_its_bash_denial_skips_the_post_event(fake, alice):
    conversation = await Conversation.objects.acreate(owner=alice, profile="system-prompt")
    await PermissionRule.objects.acreate(behavior="deny", rule_text="Bash(rm *)")
    fake.enqueue(
        Reply.tool_use("skill_load", {"skill": "echoer"}),
        Reply.tool_use("skill_run", {"skill": "echoer", "command": "echo hi"}),
        Reply.tool_use("skill_run", {"skill": "echoer", "command": "rm -rf work"}),
        Reply.text("ok"),
    )
    await run_turn(conversation, "go", alice)
    assert events() == [
        ("PreToolUse", "skill_load", "echoer", ""),
        ("PostToolUse", "skill_load", "echoer", ""),
        ("PreToolUse", "skill_run", "echoer", ""),
        ("PostToolUse", "skill_run", "echoer", ""),
        ("PreToolUse", "skill_run", "echoer", ""),
    ]


async def test_an_ordinary_call_that_is_blocked_or_denied_has_no_post_event(fake, alice):
    BLOCKED_TOOLS.add("Write")
    conversation = await Conversation.objects.acreate(owner=alice)
    fake.enqueue(
        Reply.tool_use("Write", {"file_path": "work/a.txt", "content": "x"}),
        Reply.tool_use("Edit", {"file_path": "work/a.txt", "old_string": "x", "new_string": "y"}),
        Reply.tool_use("Read", {"file_path": "work"}),
        Reply.text("ok"),
    )
    await run_turn(conversation, "go", alice, answer="deny")
    assert [e[:2] for e in events()] == [
        ("PreToolUse", "Write"),  # blocked: no post
        ("PreToolUse", "Edit"),  # the user said no: no post
        ("PreToolUse", "Read"),  # ran (and failed): post
        ("PostToolUse", "Read"),
    ]
    results = [r["messages"][-1]["content"][0]["content"] for r in accepted(fake)[1:]]
    assert results[0] == "Blocked by a hook: no Write today"
    assert results[1].startswith("Permission denied")
