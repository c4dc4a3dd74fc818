"""Skill hooks: frontmatter `hooks` register on invocation and run as sandboxed, rule-checked commands."""

from __future__ import annotations

import json
import textwrap

import pytest
from asgiref.sync import sync_to_async

from skills_app.core.hooks import Hooks
from skills_app.core.permissions import Decision
from skills_app.core.skillhooks import (
    SkillHook,
    SkillHookRunner,
    parse_skill_hooks,
    skill_hooks_from_rows,
)
from skills_app.core.tools import ToolContext, ToolResult, Workspace
from skills_app.models import Conversation, PermissionRule, Run, RunEvent, SkillInvocation
from skills_app.workspaces import workspace_for
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import accepted, rows, run_turn, use_fake_model

# -- parsing ---------------------------------------------------------------------------------


def test_it_reads_command_hooks_in_the_settings_shape():
    hooks, notes = parse_skill_hooks(
        "guard",
        {
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [{"type": "command", "command": "check.sh"}]},
                {"matcher": "Edit|Write", "hooks": [{"command": "lint.sh", "timeout": 5}]},
            ],
            "Stop": [{"hooks": [{"type": "command", "command": "bye.sh"}]}],
        },
    )
    assert hooks == [
        SkillHook("guard", "PreToolUse", "Bash", "check.sh"),
        SkillHook("guard", "PreToolUse", "Edit|Write", "lint.sh", 5.0),
        SkillHook("guard", "Stop", "", "bye.sh"),
    ]
    assert notes == []


def test_it_skips_unsupported_events_and_hook_types_with_a_note():
    hooks, notes = parse_skill_hooks(
        "guard",
        {
            "SessionStart": [{"hooks": [{"type": "command", "command": "x"}]}],
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [{"type": "prompt", "prompt": "judge"}]},
                {"matcher": "Bash", "hooks": [{"type": "command", "command": "  "}]},
                "not a group",
            ],
        },
    )
    assert hooks == []
    assert len(notes) == 4
    assert "SessionStart" in notes[0] and "prompt" in notes[1]


def test_matchers_are_tool_name_regexes_and_star_or_empty_match_everything():
    edit_or_write = SkillHook("s", "PreToolUse", "Edit|Write", "x")
    assert edit_or_write.matches("Edit") and edit_or_write.matches("Write")
    assert not edit_or_write.matches("Read")
    assert not SkillHook("s", "PreToolUse", "Bash", "x").matches("BashOutput")
    assert SkillHook("s", "PreToolUse", "*", "x").matches("Read")
    assert SkillHook("s", "PostToolUse", "", "x").matches("Glob")
    # A matcher is meaningless for prompt and stop events.
    assert SkillHook("s", "UserPromptSubmit", "Bash", "x").matches("")


def test_stored_hooks_round_trip_and_malformed_rows_are_skipped():
    hook = SkillHook("guard", "PreToolUse", "Bash", "check.sh", 3.0)
    rows_ = [[hook.as_dict()], [hook.as_dict(), {"skill": "x"}], "junk", None]
    assert skill_hooks_from_rows(rows_) == [hook]


# -- running ---------------------------------------------------------------------------------


class Harness:
    def __init__(self, tmp_path, *, behavior: str = "allow"):
        self.hooks = Hooks()
        self.reports: list[dict] = []
        self.checked: list[tuple[str, str]] = []
        self.behavior = behavior
        self.ws = Workspace(tmp_path / "conv")
        self.runner = SkillHookRunner(
            self.hooks,
            check=self.check,
            context=lambda: ToolContext(workspace=self.ws),
            report=self.report,
            session_id="sess-9",
        )

    async def check(self, command: str, skill: str) -> Decision:
        self.checked.append((command, skill))
        return Decision(self.behavior, f"{self.behavior} rule for the test", None)

    async def report(self, data: dict) -> None:
        self.reports.append(data)


async def test_exit_code_2_blocks_a_tool_call_with_the_output_as_reason(tmp_path):
    h = Harness(tmp_path)
    h.runner.register([SkillHook("guard", "PreToolUse", "Bash", "echo no rm here >&2; exit 2")])
    payload = {"tool_name": "Bash", "tool_input": {"command": "rm -rf /"}}
    blocked = await h.hooks.first_block("PreToolUse", payload)
    assert blocked is not None and blocked.reason == "no rm here"
    (report,) = h.reports
    assert report["blocked"] is True and report["exit_code"] == 2
    assert (report["skill"], report["event"], report["status"]) == (
        "guard",
        "PreToolUse",
        "blocked",
    )


async def test_a_hook_that_does_not_match_the_tool_does_not_run(tmp_path):
    h = Harness(tmp_path)
    h.runner.register([SkillHook("guard", "PreToolUse", "Edit|Write", "exit 2")])
    assert await h.hooks.first_block("PreToolUse", {"tool_name": "Read"}) is None
    assert h.reports == []


async def test_other_non_zero_exits_are_recorded_but_do_not_block(tmp_path):
    h = Harness(tmp_path)
    h.runner.register([SkillHook("guard", "PreToolUse", "", "echo oops; exit 1")])
    assert await h.hooks.first_block("PreToolUse", {"tool_name": "Read"}) is None
    assert h.reports[0]["status"] == "error" and h.reports[0]["output"] == "oops"


async def test_exit_2_does_not_block_events_that_cannot_be_blocked(tmp_path):
    h = Harness(tmp_path)
    h.runner.register([SkillHook("guard", "PostToolUse", "", "exit 2")])
    results = await h.hooks.run("PostToolUse", {"tool_name": "Read"})
    assert results == [] and h.reports[0]["blocked"] is False


async def test_the_hook_reads_its_input_json_on_stdin_env_and_file(tmp_path):
    h = Harness(tmp_path)
    command = (
        "cat > stdin.json; printf '%s' \"$SKILLSCOPE_HOOK_INPUT\" > env.json; "
        'cp "$SKILLSCOPE_HOOK_INPUT_FILE" file.json'
    )
    h.runner.register([SkillHook("guard", "PostToolUse", "Read", command)])
    await h.hooks.run(
        "PostToolUse",
        {
            "tool_name": "Read",
            "tool_input": {"file_path": "notes.txt"},
            "tool_use_id": "toolu_1",
            "result": ToolResult("alpha"),
            "invocation": 17,
        },
    )
    assert h.reports[0]["status"] == "ran"
    seen = [
        json.loads((h.ws.root / n).read_text()) for n in ("stdin.json", "env.json", "file.json")
    ]
    assert seen[0] == seen[1] == seen[2]
    assert seen[0] == {
        "session_id": "sess-9",
        "hook_event_name": "PostToolUse",
        "cwd": str(h.ws.root),
        "skill": "guard",
        "tool_name": "Read",
        "tool_input": {"file_path": "notes.txt"},
        "tool_use_id": "toolu_1",
        "tool_response": {"content": "alpha", "is_error": False},
    }
    assert not list((h.ws.work_dir / ".tmp").glob("hook-input-*"))  # the input file is removed


async def test_a_skill_call_reaches_the_hook_with_the_skill_and_its_args(tmp_path):
    h = Harness(tmp_path)
    h.runner.register([SkillHook("guard", "PreToolUse", "Skill", "cat > stdin.json")])
    payload = {
        "tool_name": "Skill",
        "tool_input": {"skill": "greeter", "args": "Ada"},
        "skill": "greeter",
        "args": "Ada",
    }
    assert await h.hooks.first_block("PreToolUse", payload) is None
    seen = json.loads((h.ws.root / "stdin.json").read_text())
    # "skill" stays the hook's own skill; the call's skill and args are under skill_call.
    assert seen["skill"] == "guard"
    assert seen["skill_call"] == {"skill": "greeter", "args": "Ada"}


@pytest.mark.parametrize("behavior", ["ask", "deny"])
async def test_a_hook_the_rules_do_not_allow_is_skipped_and_audited(tmp_path, behavior):
    h = Harness(tmp_path, behavior=behavior)
    h.runner.register([SkillHook("guard", "PreToolUse", "", "touch ran; exit 2")])
    assert await h.hooks.first_block("PreToolUse", {"tool_name": "Bash"}) is None
    assert not (h.ws.root / "ran").exists()
    (report,) = h.reports
    assert report["status"] == "skipped" and report["reason"].startswith(behavior)
    assert report["exit_code"] is None
    assert h.checked == [("touch ran; exit 2", "guard")]


async def test_registering_the_same_hook_twice_installs_it_once(tmp_path):
    h = Harness(tmp_path)
    hook = SkillHook("guard", "Stop", "", "true")
    assert h.runner.register([hook]) == [hook]
    assert h.runner.register([hook, hook]) == []
    assert len(h.hooks.handlers["Stop"]) == 1


# -- end to end ------------------------------------------------------------------------------

SKILLS = {
    "guard": """\
        ---
        name: guard
        description: Guards the shell.
        hooks:
          PreToolUse:
            - matcher: Bash
              hooks:
                - type: command
                  command: "echo guard says no; exit 2"
        ---
        GUARD-BODY
        """,
    "gate": """\
        ---
        name: gate
        description: Stops every later prompt.
        hooks:
          UserPromptSubmit:
            - hooks:
                - type: command
                  command: "echo prompts are closed; exit 2"
        ---
        GATE-BODY
        """,
    "toucher": """\
        ---
        name: toucher
        description: Has a hook the rules do not allow.
        hooks:
          PostToolUse:
            - matcher: "*"
              hooks:
                - type: command
                  command: "touch hook-ran"
        ---
        TOUCHER-BODY
        """,
}

db = pytest.mark.django_db(transaction=True)


@pytest.fixture
def setup(settings, fake_anthropic, tmp_path):
    use_fake_model(settings, fake_anthropic)
    root = tmp_path / "skills"
    for name, text in SKILLS.items():
        (root / name).mkdir(parents=True)
        (root / name / "SKILL.md").write_text(textwrap.dedent(text))
    settings.SKILLS_DIRS = [root]
    settings.AGENT_HOOKS = {"UserPromptSubmit": [], "PreToolUse": [], "PostToolUse": [], "Stop": []}
    return fake_anthropic


@pytest.fixture
def conversation(alice):
    for text in ("Skill", "Bash(echo *)", "Bash(exit *)", "Bash(ls *)"):
        PermissionRule.objects.create(behavior="allow", rule_text=text)
    return Conversation.objects.create(owner=alice, title="hooks")


async def hook_events(conversation) -> list[dict]:
    query = RunEvent.objects.filter(conversation=conversation, type="audit.hook").order_by("seq")
    return [e.data async for e in query]


def tool_result_of(request: dict) -> dict:
    return request["messages"][-1]["content"][0]


@db
async def test_a_skill_hook_registered_in_one_turn_blocks_a_tool_in_a_later_turn(
    setup, conversation, alice
):
    setup.enqueue(Reply.text("Guard loaded."))
    await run_turn(conversation, "/guard", alice)
    (row,) = [i async for i in SkillInvocation.objects.filter(conversation=conversation)]
    assert row.hooks == [
        {
            "skill": "guard",
            "event": "PreToolUse",
            "matcher": "Bash",
            "command": "echo guard says no; exit 2",
            "timeout": None,
        }
    ]

    setup.enqueue(
        Reply.tool_use("Bash", {"command": "ls"}, text="Listing."),
        Reply.text("The guard stopped me."),
    )
    run = await run_turn(conversation, "list the files", alice)
    assert run.status == Run.DONE
    result = tool_result_of(accepted(setup)[-1])
    assert result["is_error"] is True
    assert result["content"] == "Blocked by a hook: guard says no"
    (event,) = await hook_events(conversation)
    assert event["skill"] == "guard" and event["event"] == "PreToolUse"
    assert event["command"] == "echo guard says no; exit 2"
    assert (event["exit_code"], event["blocked"], event["tool_name"]) == (2, True, "Bash")
    assert event["output"] == "guard says no"


@db
async def test_a_hook_applies_in_the_same_turn_right_after_the_model_loads_the_skill(
    setup, conversation, alice
):
    setup.enqueue(
        Reply.tool_use("Skill", {"skill": "guard"}, text="Loading."),
        Reply.tool_use("Read", {"file_path": "nothing.txt"}),
        Reply.tool_use("Bash", {"command": "ls"}),
        Reply.text("Done."),
    )
    await run_turn(conversation, "go", alice)
    requests = accepted(setup)
    assert "Blocked by a hook" not in str(tool_result_of(requests[2]))  # Read: no match
    assert tool_result_of(requests[3])["content"] == "Blocked by a hook: guard says no"
    assert [e["tool_name"] for e in await hook_events(conversation)] == ["Bash"]


@db
async def test_a_user_prompt_hook_blocks_later_messages(setup, conversation, alice):
    setup.enqueue(Reply.text("Gate loaded."))
    await run_turn(conversation, "/gate", alice)
    await run_turn(conversation, "hello again", alice)
    assert len(accepted(setup)) == 1  # the second message never reached the model
    stored = await sync_to_async(rows)(conversation)
    assert "blocked by a hook: prompts are closed" in stored[-1].content[0]["text"]
    events = await hook_events(conversation)
    assert [(e["event"], e["blocked"]) for e in events] == [("UserPromptSubmit", True)]


@db
async def test_a_hook_the_rules_do_not_allow_is_skipped_and_the_skip_audited(
    setup, conversation, alice
):
    setup.enqueue(
        Reply.tool_use("Skill", {"skill": "toucher"}),
        Reply.tool_use("Bash", {"command": "echo hi"}),
        Reply.text("ok"),
    )
    await run_turn(conversation, "go", alice)
    assert "hi" in str(tool_result_of(accepted(setup)[2])["content"])
    ws = await sync_to_async(workspace_for)(conversation.pk)
    assert not (ws.root / "hook-ran").exists()
    # The hook fires for the Skill call that registered it, then for Bash: skipped both times.
    events = await hook_events(conversation)
    assert [e["tool_name"] for e in events] == ["Skill", "Bash"]
    for event in events:
        assert event["status"] == "skipped" and "default for Bash: ask" in event["reason"]


@db
async def test_hooks_of_a_skill_no_longer_offered_are_not_registered_again(
    setup, conversation, alice, settings, tmp_path
):
    setup.enqueue(Reply.text("Guard loaded."))
    await run_turn(conversation, "/guard", alice)
    settings.SKILLS_DIRS = [tmp_path / "empty"]
    setup.enqueue(Reply.tool_use("Bash", {"command": "ls"}), Reply.text("ok"))
    await run_turn(conversation, "list", alice)
    assert "Blocked" not in str(tool_result_of(accepted(setup)[-1])["content"])
    assert await hook_events(conversation) == []


@db
async def test_an_admin_rule_scoped_to_the_skill_allows_its_hook(setup, conversation, alice):
    await PermissionRule.objects.acreate(
        behavior="allow", rule_text="Bash(touch hook-ran)", skill="toucher"
    )
    setup.enqueue(Reply.text("Toucher loaded."))
    await run_turn(conversation, "/toucher", alice)
    setup.enqueue(Reply.tool_use("Bash", {"command": "echo hi"}), Reply.text("ok"))
    await run_turn(conversation, "say hi", alice)
    ws = await sync_to_async(workspace_for)(conversation.pk)
    assert (ws.root / "hook-ran").exists()
    (event,) = await hook_events(conversation)
    assert (event["status"], event["exit_code"], event["event"]) == ("ran", 0, "PostToolUse")
