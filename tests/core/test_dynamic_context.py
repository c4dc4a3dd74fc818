"""Dynamic context: `!` commands in a skill body run, under the rules, before the body is delivered."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async

from skills_app.core.dynamic import (
    DISABLED_NOTICE,
    SHELL_DENIED,
    SHELL_FAILED,
    DynamicContextError,
    ShellResult,
    find_placeholders,
    render_dynamic,
    run_shell,
)
from skills_app.core.permissions import Decision
from skills_app.core.skillfile import parse_skill_dir
from skills_app.core.tools import ToolContext, Workspace
from skills_app.models import Conversation, PermissionRule, Run, SkillInvocation
from skills_app.workspaces import workspace_for
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import accepted, count_in_request, rows, run_turn, use_fake_model

# -- finding placeholders ------------------------------------------------------------------------


def test_it_finds_an_inline_command_at_line_start_and_after_whitespace():
    body = "!`date`\nToday is !`date +%A` and\tnow !`whoami`."
    found = find_placeholders(body)
    assert [(p.command, p.form) for p in found] == [
        ("date", "inline"),
        ("date +%A", "inline"),
        ("whoami", "inline"),
    ]
    assert body[found[1].start : found[1].end] == "!`date +%A`"


def test_it_does_not_find_a_command_inside_a_word_or_after_punctuation():
    assert find_placeholders("Say wow!`date` or (!`date`) or a`!`b` here.") == []


def test_it_finds_a_fenced_block_as_one_multi_line_command():
    body = "Before\n```!\necho one\necho two\n```\nAfter !`pwd`\n"
    found = find_placeholders(body)
    assert [(p.command, p.form) for p in found] == [
        ("echo one\necho two", "block"),
        ("pwd", "inline"),
    ]
    assert body[found[0].start : found[0].end] == "```!\necho one\necho two\n```"


def test_a_rejected_match_inside_a_word_does_not_hide_a_real_command_after_it():
    assert [p.command for p in find_placeholders("x!`a !`b`")] == ["b"]


def test_an_unclosed_fenced_opener_is_not_a_command_but_inline_ones_still_count():
    found = find_placeholders("```!\necho never\nthen !`date`\n")
    assert [(p.command, p.form) for p in found] == [("date", "inline")]


def test_an_ordinary_fenced_block_is_not_a_command():
    assert find_placeholders("```bash\necho not run\n```\n") == []


# -- rendering with fake check / execute -----------------------------------------------------


def make_spec(tmp_path: Path, body: str, frontmatter: str = ""):
    folder = tmp_path / "src" / "dyn"
    folder.mkdir(parents=True, exist_ok=True)
    text = f"---\nname: dyn\ndescription: Dynamic context.\n{frontmatter}---\n{body}"
    (folder / "SKILL.md").write_text(text)
    return parse_skill_dir(folder)


class Shell:
    """A scripted check and executor that records what they were asked."""

    def __init__(self, *, behavior: str = "allow", outputs: dict[str, ShellResult] | None = None):
        self.behavior = behavior
        self.outputs = outputs or {}
        self.checked: list[str] = []
        self.ran: list[str] = []

    async def check(self, command: str) -> Decision:
        self.checked.append(command)
        return Decision(self.behavior, f'{self.behavior} rule "Bash(x *)" (admin #7)', None)

    async def execute(self, command: str) -> ShellResult:
        self.ran.append(command)
        return self.outputs.get(command, ShellResult(0, f"<{command}>\n"))


async def render(spec, shell: Shell, args: str = "", **options):
    return await render_dynamic(
        spec,
        args,
        skill_dir="/ws/skills/dyn",
        session_id="sess-1",
        check=shell.check,
        execute=shell.execute,
        **options,
    )


async def test_allowed_commands_are_replaced_by_their_output(tmp_path):
    spec = make_spec(tmp_path, "Branch: !`git branch`\n```!\necho a\necho b\n```\nEnd\n")
    shell = Shell()
    result = await render(spec, shell)
    assert result.text == (
        "Base directory for this skill: /ws/skills/dyn\n\n"
        "Branch: <git branch>\n<echo a\necho b>\nEnd"
    )
    assert shell.ran == ["git branch", "echo a\necho b"]
    assert [(r.command, r.status, r.exit_code) for r in result.runs] == [
        ("git branch", "ran", 0),
        ("echo a\necho b", "ran", 0),
    ]


async def test_output_that_looks_like_a_command_is_not_run_again(tmp_path):
    spec = make_spec(tmp_path, "Data: !`cat data`\n")
    shell = Shell(outputs={"cat data": ShellResult(0, "!`touch pwned` and $ARGUMENTS")})
    result = await render(spec, shell, args="A1")
    assert shell.ran == ["cat data"]
    assert "Data: !`touch pwned` and $ARGUMENTS" in result.text


async def test_arguments_are_substituted_inside_commands_but_never_become_commands(tmp_path):
    spec = make_spec(tmp_path, "Log: !`git log $0`\nTopic: $ARGUMENTS\n")
    shell = Shell()
    result = await render(spec, shell, args="main !`touch pwned`")
    assert shell.checked == ["git log main"]
    assert shell.ran == ["git log main"]
    assert "Topic: main !`touch pwned`" in result.text


@pytest.mark.parametrize("behavior", ["deny", "ask"])
async def test_a_command_the_rules_do_not_allow_aborts_without_running(tmp_path, behavior):
    spec = make_spec(tmp_path, "Ok !`echo fine`\nThen !`rm -rf out`\nNever !`echo late`\n")
    shell = Shell()

    async def check(command: str) -> Decision:
        kind = behavior if command.startswith("rm") else "allow"
        return Decision(kind, f'{kind} rule "Bash(rm *)" (admin #3)', None)

    shell.check = check  # type: ignore[method-assign]
    with pytest.raises(DynamicContextError) as caught:
        await render(spec, shell)
    error = caught.value
    assert error.code == SHELL_DENIED
    # The command is hidden content: the error names its position and the rule, not its text.
    assert "rm -rf out" not in error.message and 'Bash(rm *)" (admin #3)' in error.message
    assert "command 2 of 3" in error.message
    assert behavior in error.message
    assert shell.ran == ["echo fine"]
    assert [(r.command, r.status) for r in error.runs] == [
        ("echo fine", "ran"),
        ("rm -rf out", "denied"),
    ]


async def test_without_a_permission_check_no_command_runs(tmp_path):
    spec = make_spec(tmp_path, "X !`echo hi`\n")
    shell = Shell()
    with pytest.raises(DynamicContextError) as caught:
        await render_dynamic(
            spec, "", skill_dir="/d", session_id="s", check=None, execute=shell.execute
        )
    assert caught.value.code == SHELL_DENIED and shell.ran == []


async def test_a_non_zero_exit_aborts_naming_the_exit_code_not_the_command(tmp_path):
    spec = make_spec(tmp_path, "X !`ls nowhere`\n")
    shell = Shell(outputs={"ls nowhere": ShellResult(2, "ls: cannot access 'nowhere'")})
    with pytest.raises(DynamicContextError) as caught:
        await render(spec, shell)
    assert caught.value.code == SHELL_FAILED
    assert "command 1 of 1" in caught.value.message
    assert "failed with exit code 2" in caught.value.message
    assert "nowhere" not in caught.value.message  # neither the command nor its output
    assert "cannot access" in caught.value.runs[-1].output  # both kept for the audit
    assert caught.value.runs[-1].exit_code == 2


async def test_a_timeout_aborts(tmp_path):
    spec = make_spec(tmp_path, "X !`sleep 500`\n")
    shell = Shell(outputs={"sleep 500": ShellResult(None, "", timed_out=True)})
    with pytest.raises(DynamicContextError) as caught:
        await render(spec, shell)
    assert "timed out" in caught.value.message and "sleep" not in caught.value.message


async def test_disabled_shell_replaces_each_command_with_a_notice(tmp_path):
    spec = make_spec(tmp_path, "A !`date`\n```!\necho b\n```\n")
    shell = Shell()
    result = await render(spec, shell, disabled=True)
    assert result.text.endswith(f"A {DISABLED_NOTICE}\n{DISABLED_NOTICE}")
    assert shell.ran == [] and shell.checked == []
    assert [r.status for r in result.runs] == ["disabled", "disabled"]


async def test_a_body_without_commands_renders_as_before(tmp_path):
    spec = make_spec(tmp_path, "Plain $ARGUMENTS body\n")
    shell = Shell()
    result = await render(spec, shell, args="x")
    assert result.text == "Base directory for this skill: /ws/skills/dyn\n\nPlain x body"
    assert result.runs == () and shell.checked == []


# -- the real shell --------------------------------------------------------------------------


@pytest.fixture
def ctx(tmp_path) -> ToolContext:
    return ToolContext(workspace=Workspace(tmp_path / "conv"))


async def test_run_shell_merges_stderr_and_reports_the_exit_code(ctx):
    result = await run_shell("echo out; echo err >&2; exit 3", ctx)
    assert result.exit_code == 3
    assert "out" in result.output and "err" in result.output
    assert "Exit code" not in result.output


async def test_run_shell_reports_success_and_a_timeout(ctx):
    ok = await run_shell("printf 'a\\n\\nb'", ctx)
    assert (ok.exit_code, ok.output) == (0, "a\n\nb")
    slow = await run_shell("sleep 5", ctx, timeout=0.3)
    assert slow.exit_code is None and slow.timed_out


async def test_run_shell_does_not_pass_the_server_environment(ctx, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret-value")
    result = await run_shell("env", ctx)
    assert result.exit_code == 0 and "sk-secret-value" not in result.output


# -- end to end: the fake model, the database, the audit --------------------------------------

SKILLS = {
    "clock": """\
        ---
        name: clock
        description: Knows what the shell says.
        ---
        Shell says: !`echo dyn-output-42`
        Done.
        """,
    "pre-approved": """\
        ---
        name: pre-approved
        description: Pre-approves its own command.
        allowed-tools: Bash(echo *)
        ---
        Pre: !`echo approved-by-skill`
        """,
    "tricky": """\
        ---
        name: tricky
        description: Prints something that looks like a command.
        ---
        ```!
        printf '%s\\n' '!`touch pwned`'
        ```
        """,
    "marker": """\
        ---
        name: marker
        description: Leaves a mark.
        ---
        Mark: !`touch made-by-skill`
        """,
    "broken": """\
        ---
        name: broken
        description: Runs a failing command.
        ---
        Listing: !`ls no-such-file`
        """,
}

pytestmark_db = pytest.mark.django_db(transaction=True)


@pytest.fixture
def setup(settings, fake_anthropic, tmp_path):
    use_fake_model(settings, fake_anthropic)
    root = tmp_path / "skills"
    for name, text in SKILLS.items():
        (root / name).mkdir(parents=True)
        (root / name / "SKILL.md").write_text(textwrap.dedent(text))
    settings.SKILLS_DIRS = [root]
    settings.AGENT_HOOKS = {"UserPromptSubmit": [], "PreToolUse": [], "PostToolUse": [], "Stop": []}
    settings.DISABLE_SKILL_SHELL = False
    return fake_anthropic


@pytest.fixture
def conversation(alice):
    PermissionRule.objects.create(behavior="allow", rule_text="Skill")
    return Conversation.objects.create(owner=alice, title="dynamic")


def rule(behavior: str, text: str) -> PermissionRule:
    return PermissionRule.objects.create(behavior=behavior, rule_text=text)


async def invocations(conversation) -> list[SkillInvocation]:
    return [
        i async for i in SkillInvocation.objects.filter(conversation=conversation).order_by("pk")
    ]


@pytestmark_db
async def test_an_allowed_command_output_reaches_the_model_and_the_audit(
    setup, conversation, alice
):
    echo = await sync_to_async(rule)("allow", "Bash(echo *)")
    setup.enqueue(Reply.text("It says 42."))
    run = await run_turn(conversation, "/clock", alice)
    assert run.status == Run.DONE
    hidden = [m for m in await sync_to_async(rows)(conversation) if m.kind == "skill_prompt"]
    assert len(hidden) == 1
    text = hidden[0].content[0]["text"]
    assert "Shell says: dyn-output-42\nDone." in text and "!`" not in text
    request = accepted(setup)[0]
    assert count_in_request(request, "dyn-output-42") == 1
    assert count_in_request(request, "echo dyn-output-42") == 0
    (row,) = await invocations(conversation)
    assert row.decision == "allowed"
    assert row.shell_commands == [
        {
            "command": "echo dyn-output-42",
            "form": "inline",
            "status": "ran",
            "exit_code": 0,
            "output": "dyn-output-42",
            "reason": f'allow rule "Bash(echo *)" (admin #{echo.pk})',
        }
    ]
    assert "dyn-output-42" in row.injected_text


@pytestmark_db
async def test_without_an_allow_rule_the_invocation_fails_and_delivers_nothing(
    setup, conversation, alice
):
    setup.enqueue(Reply.text("unused"))
    await run_turn(conversation, "/clock", alice)
    stored = await sync_to_async(rows)(conversation)
    assert not any(m.kind == "skill_prompt" for m in stored)
    error = next(m for m in stored if m.kind == "error")
    assert "dyn-output" not in error.content[0]["text"]
    assert "default for Bash: ask" in error.content[0]["text"]
    (row,) = await invocations(conversation)
    assert (row.decision, row.error_code) == ("failed", SHELL_DENIED)
    assert row.shell_commands[0]["status"] == "denied"
    assert setup.requests == []  # the slash command failed: the model was never called


@pytestmark_db
async def test_a_model_call_gets_an_error_result_naming_the_deny_rule_not_the_command(
    setup, conversation, alice
):
    deny = await sync_to_async(rule)("deny", "Bash(echo dyn-*)")
    await sync_to_async(rule)("allow", "Bash(echo *)")
    setup.enqueue(
        Reply.tool_use("Skill", {"skill": "clock"}, text="Loading."),
        Reply.text("Could not load it."),
    )
    run = await run_turn(conversation, "what does the clock say?", alice)
    assert run.status == Run.DONE
    result = accepted(setup)[1]["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["is_error"] is True
    assert "dyn-output" not in result["content"] and "command 1 of 1" in result["content"]
    assert f'deny rule "Bash(echo dyn-*)" (admin #{deny.pk})' in result["content"]
    assert count_in_request(accepted(setup)[1], "Shell says") == 0


@pytestmark_db
async def test_allowed_tools_pre_approve_but_an_admin_ask_still_aborts(setup, conversation, alice):
    setup.enqueue(Reply.text("ok"))
    await run_turn(conversation, "/pre-approved", alice)
    first = (await invocations(conversation))[0]
    assert first.decision == "allowed"
    assert "Pre: approved-by-skill" in first.injected_text
    assert "allowed-tools" in first.shell_commands[0]["reason"]

    await sync_to_async(rule)("ask", "Bash(echo approved*)")
    await run_turn(conversation, "/pre-approved", alice)
    second = (await invocations(conversation))[1]
    assert (second.decision, second.error_code) == ("failed", SHELL_DENIED)
    assert "ask rule" in second.error


@pytestmark_db
async def test_output_is_substituted_once_and_never_run_as_a_command(setup, conversation, alice):
    await sync_to_async(rule)("allow", "Bash(printf *)")
    setup.enqueue(Reply.text("ok"))
    await run_turn(conversation, "/tricky", alice)
    (row,) = await invocations(conversation)
    assert row.decision == "allowed"
    assert row.injected_text.endswith("\n\n!`touch pwned`")
    ws = await sync_to_async(workspace_for)(conversation.pk)
    assert not list(ws.root.rglob("pwned"))
    assert [c["command"] for c in row.shell_commands] == ["printf '%s\\n' '!`touch pwned`'"]


@pytestmark_db
async def test_a_non_zero_exit_fails_the_invocation_with_the_exit_code(setup, conversation, alice):
    await sync_to_async(rule)("allow", "Bash(ls *)")
    await run_turn(conversation, "/broken", alice)
    (row,) = await invocations(conversation)
    assert (row.decision, row.error_code) == ("failed", SHELL_FAILED)
    assert "failed with exit code 2" in row.error and "no-such-file" not in row.error
    assert row.shell_commands[0]["exit_code"] == 2
    assert "no-such-file" in row.shell_commands[0]["output"]


@pytestmark_db
async def test_commands_run_in_the_conversation_workspace(setup, conversation, alice):
    await sync_to_async(rule)("allow", "Bash(touch *)")
    setup.enqueue(Reply.text("ok"))
    await run_turn(conversation, "/marker", alice)
    ws = await sync_to_async(workspace_for)(conversation.pk)
    assert (ws.root / "made-by-skill").exists()


@pytestmark_db
async def test_disable_skill_shell_delivers_a_notice_and_runs_nothing(
    setup, conversation, alice, settings
):
    settings.DISABLE_SKILL_SHELL = True
    await sync_to_async(rule)("allow", "Bash(touch *)")
    setup.enqueue(Reply.text("ok"))
    await run_turn(conversation, "/marker", alice)
    (row,) = await invocations(conversation)
    assert row.decision == "allowed"
    assert f"Mark: {DISABLED_NOTICE}" in row.injected_text
    assert row.shell_commands[0]["status"] == "disabled"
    ws = await sync_to_async(workspace_for)(conversation.pk)
    assert not (ws.root / "made-by-skill").exists()
