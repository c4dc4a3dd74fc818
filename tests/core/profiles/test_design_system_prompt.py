"""`system-prompt` "as the source design" judged by the skill toolset's own code (seed 004).

The oracle (`tests/support/design_oracles/toolset.py`) re-types the article's `SkillRunInput`,
`SkillRunOutput`, skill_run's declaration and `_inject_overview`; the app runs through the real
SDK against the fake Anthropic server and what it sent is compared byte for byte.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from skills_app.models import Approval, Conversation, PermissionRule
from skills_app.workspaces import workspace_for
from tests.support.design_oracles import toolset
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import accepted, run_turn, use_fake_model, write_skills

pytestmark = pytest.mark.django_db(transaction=True)

SKILLS = {
    "kit": """\
        ---
        name: kit
        description: A kit that would switch models and pre-approve echo.
        model: claude-haiku-4-5
        allowed-tools: Bash(echo *)
        ---
        KIT-BODY: run `python3 scripts/hello.py`.
        """,
}


@pytest.fixture
def fake(settings, fake_anthropic, tmp_path):
    use_fake_model(settings, fake_anthropic)
    root = write_skills(tmp_path / "skills", SKILLS)
    (root / "kit" / "scripts").mkdir()
    (root / "kit" / "scripts" / "hello.py").write_text("print('hello kit')\n")
    settings.SKILLS_DIRS = [root]
    # The design keeps loaded state for one turn whatever Skillscope's setting says.
    settings.SKILL_STATE_LIFETIME = "conversation"
    return fake_anthropic


async def design(alice: Any) -> Conversation:
    return await Conversation.objects.acreate(
        owner=alice, profile="system-prompt", base_prompt="design"
    )


def result(request: dict[str, Any]) -> dict[str, Any]:
    block: dict[str, Any] = request["messages"][-1]["content"][0]
    return block


def listing(system: str) -> str:
    return system.split("\nAvailable skills:\n", 1)[1].split("\nTooling and workspace", 1)[0]


async def test_the_request_is_the_designs_overview_skill_run_and_options(fake, alice):
    conversation = await design(alice)
    fake.enqueue(Reply.text("ok"))
    await run_turn(conversation, "hi", alice)
    (request,) = accepted(fake)
    skill_lines = listing(request["system"])
    assert request["system"] == toolset.inject_overview(skill_lines)  # a string, as printed
    # The listing's format is not in the article: Skillscope's, one line per model skill.
    assert "- kit: A kit that would switch models and pre-approve echo." in skill_lines.split("\n")
    run = next(t for t in request["tools"] if t["name"] == "skill_run")
    # Byte for byte, key order included: what `_get_declaration` builds from the models.
    assert json.dumps(run) == json.dumps(toolset.declaration())
    assert "thinking" not in request and "output_config" not in request
    assert "cache_control" not in json.dumps(request)


async def test_skill_run_runs_as_the_design_runs_it(fake, alice):
    conversation = await design(alice)
    show = (
        'for v in WORKSPACE_DIR SKILLS_DIR WORK_DIR OUTPUT_DIR RUN_DIR SKILL_NAME; do echo "$v=${!v}"; '
        "done; shopt -q login_shell && echo LOGIN; readlink out work; pwd; "
        'echo x > "$OUTPUT_DIR/report.txt"; python3 scripts/hello.py; touch SKILL.md 2>/dev/null '
        "|| echo READ-ONLY"
    )
    fake.enqueue(
        # No skill_load first: the design's skill_run stages any skill of its repository.
        Reply.tool_use(
            "skill_run",
            {
                "skill": "kit",
                "command": show,
                "output_files": ["$OUTPUT_DIR/*.txt"],
                "save_as_artifacts": True,
            },
        ),
        Reply.text("ok"),
    )
    # "deny": any approval would refuse the command, so the run proves none was asked.
    await run_turn(conversation, "run it", alice, answer="deny")
    block = result(accepted(fake)[1])
    assert "is_error" not in block
    payload = json.loads(block["content"])
    assert list(payload) == list(toolset.SkillRunOutput.model_fields)  # no artifact_files
    toolset.SkillRunOutput.model_validate(payload)
    lines = payload["stdout"].splitlines()
    values = dict(line.split("=", 1) for line in lines if "=" in line)
    assert list(values) == list(toolset.ENVIRONMENT)
    ws = await sync_to_async(workspace_for)(conversation.pk)
    staged = ws.skills_dir / "kit"
    assert values["SKILL_NAME"] == "kit" and values["SKILLS_DIR"] == str(ws.skills_dir)
    assert "LOGIN" in lines  # bash -lc
    assert lines[lines.index("LOGIN") + 1 :][:5] == [
        toolset.LINKS["out"],
        toolset.LINKS["work"],
        str(staged),
        "hello kit",
        "READ-ONLY",
    ]
    assert [f["name"] for f in payload["output_files"]] == ["out/report.txt"]
    # The run folder keeps the run's record (it is not left empty).
    record = json.loads((ws.root / values["RUN_DIR"] / "record.json").read_text())
    assert record["command"] == show and record["exit_code"] == 0
    assert not await Approval.objects.filter(conversation=conversation).aexists()


async def test_the_rules_still_decide_skill_run_commands(fake, alice):
    await PermissionRule.objects.acreate(behavior="deny", rule_text="Bash(rm *)")
    await PermissionRule.objects.acreate(behavior="ask", rule_text="Bash(curl *)")
    conversation = await design(alice)
    fake.enqueue(
        Reply.tool_use("skill_run", {"skill": "kit", "command": "echo a; rm -rf work"}),
        Reply.tool_use("skill_run", {"skill": "kit", "command": "curl -s example.invalid"}),
        Reply.tool_use("skill_run", {"skill": "kit", "command": "echo allowed"}),
        Reply.text("ok"),
    )
    await run_turn(conversation, "go", alice, answer="deny")
    denied, asked, allowed = (result(r) for r in accepted(fake)[1:])
    assert denied["is_error"] is True and "Bash(rm *)" in denied["content"]
    assert asked["is_error"] is True and "Permission denied" in asked["content"]
    assert [a.tool async for a in Approval.objects.filter(conversation=conversation)] == ["Bash"]
    assert json.loads(allowed["content"])["stdout"] == "allowed\n"


async def test_skill_load_asks_no_one_and_applies_no_claude_code_context(fake, alice):
    conversation = await design(alice)
    fake.enqueue(
        Reply.tool_use("skill_load", {"skill": "kit"}),
        Reply.tool_use("Bash", {"command": "echo pre-approved?"}),
        Reply.text("ok"),
    )
    await run_turn(conversation, "load", alice, answer="deny")
    first, second, third = accepted(fake)
    assert "is_error" not in result(second)
    assert "KIT-BODY" in second["system"] and "KIT-BODY" not in json.dumps(second["messages"])
    # Claude Code's per-skill model and allowed-tools are not the design's: neither applies.
    assert {r["model"] for r in (first, second, third)} == {first["model"]}
    assert result(third)["content"].startswith("Permission denied")
    asked = [a.tool async for a in Approval.objects.filter(conversation=conversation)]
    assert asked == ["Bash"]  # the ordinary Bash tool keeps Skillscope's default: it asked


async def test_loaded_state_lasts_for_the_turn_as_in_the_design(fake, alice):
    conversation = await design(alice)
    fake.enqueue(Reply.tool_use("skill_load", {"skill": "kit"}), Reply.text("a"), Reply.text("b"))
    await run_turn(conversation, "load", alice)
    await run_turn(conversation, "and now?", alice)
    loaded, next_turn = accepted(fake)[1], accepted(fake)[2]
    assert "KIT-BODY" in loaded["system"] and "KIT-BODY" not in next_turn["system"]


async def test_a_slash_command_reaches_the_model_as_typed(fake, alice):
    conversation = await design(alice)
    fake.enqueue(Reply.text("ok"))
    await run_turn(conversation, "/kit now", alice)
    (request,) = accepted(fake)
    assert request["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "/kit now"}]}
    ]
    assert "KIT-BODY" not in request["system"]
    assert re.search(r"^- kit: ", listing(request["system"]), re.M)
