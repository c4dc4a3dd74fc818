"""Issue 11, rules that hold: deny reaches every command in the tree, writes need Write, Read
deny filters searches, skill_run's environment is checked and shown to the rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skills_app.core.permissions import (
    PermissionContext,
    ToolCall,
    analyze,
    decide,
    parse_rule,
    read_filter,
)
from skills_app.core.tools import (
    BashTool,
    GlobTool,
    GrepTool,
    ToolContext,
    ToolError,
    Workspace,
    command_with_env,
    skill_run_env,
)

WS = Path("/srv/ws/conv-1")


def ctx(*rules: tuple[str, str]) -> PermissionContext:
    return PermissionContext(workspace=WS, admin_rules=[parse_rule(t, b) for b, t in rules])


def bash(command: str, *rules: tuple[str, str]) -> str:
    return decide(ToolCall("Bash", {"command": command}), ctx(*rules)).behavior


DENY_RM = ("deny", "Bash(rm *)")
WALKAROUNDS = [
    "(rm -rf work)",
    "{ rm -rf work; }",
    "\\rm -rf work",
    "r''m -rf work",
    '"rm" -rf work',
    "$'\\x72m' -rf work",
    "env rm -rf work",
    "env -i FOO=1 rm -rf work",
    "command rm -rf work",
    "builtin rm -rf work",
    "exec rm -rf work",
    "nice -n 5 rm -rf work",
    "timeout -s KILL 5 rm -rf work",
    "nohup rm -rf work",
    "stdbuf -o0 rm -rf work",
    "time -p rm -rf work",
    "setsid rm -rf work",
    "sudo -u root rm -rf work",
    "ls | xargs -0 -n 1 rm",
    "/bin/rm -rf work",
    "bash -c 'rm -rf work'",
    'sh -c "cd /; rm -rf work"',
    "bash -lc 'echo hi && rm -rf work'",
    "bash -o pipefail -c 'rm -rf work'",
    "env bash -c 'rm -rf work'",
    "bash -c \"bash -c 'rm -rf work'\"",
    "eval 'rm -rf work'",
    "eval rm -rf work",
    "if true; then rm -rf work; fi",
    "for f in a b; do rm -rf $f; done",
    "while false; do :; done; until rm x; do :; done",
    "case x in x) rm -rf work;; esac",
    "echo $(rm -rf work)",
    "echo `rm -rf work`",
    "cat <(rm -rf work)",
    "f() { rm -rf work; }; f",
    "x=$(rm -rf work) true",
    "find . -name x -exec rm {} \\;",
    "bash <<'EOF'\nrm -rf work\nEOF",
    "bash <<< 'rm -rf work'",
    "trap 'rm -rf work' EXIT",
    "! rm -rf work",
    "true && (cd work && { rm -rf . ; })",
]


@pytest.mark.parametrize("command", WALKAROUNDS)
def test_a_deny_rule_reaches_the_command_however_it_is_wrapped(command: str) -> None:
    assert bash(command, DENY_RM, ("allow", "Bash")) == "deny"
    assert bash(command, DENY_RM) == "deny"


def test_quoted_text_is_not_a_command() -> None:
    assert bash('echo "rm -rf work"', DENY_RM, ("allow", "Bash(echo *)")) == "allow"
    assert bash("grep -r 'rm -rf' .", DENY_RM, ("allow", "Bash(grep *)")) == "allow"


@pytest.mark.parametrize(
    "command",
    [
        "$CMD -rf work",
        "$(echo rm) -rf work",
        'eval "$X"',
        'bash -c "$X"',
        "echo rm -rf work | bash",
        "/bin/r? -rf work",
        "alias x=rm",
        "echo 'unterminated",
    ],
)
def test_what_cannot_be_seen_through_is_ask_at_best_never_allow(command: str) -> None:
    assert bash(command, ("allow", "Bash(*)"), ("allow", "Bash(echo *)"), DENY_RM) != "allow"
    assert bash(command, ("allow", "Bash(echo *)"), ("allow", "Bash(bash *)")) != "allow"


def test_output_redirections_are_writes_that_need_write_permission() -> None:
    echo = ("allow", "Bash(echo *)")
    assert bash("echo x > /any/path", echo) == "deny"  # outside the workspace: Write denies
    # Inside the workspace a redirection needs no more than the command (cp could write there).
    assert bash("echo x > out/r.md", echo) == "allow"
    assert bash('echo x > "$OUTPUT_DIR/r.md"', echo) == "allow"
    assert bash("echo x > out/r.md", echo, ("ask", "Edit(./out/**)")) == "ask"
    assert (
        bash("OUTPUT_DIR=/etc; echo x > $OUTPUT_DIR/passwd", echo, ("allow", "Bash(OUTPUT_DIR=*)"))
        != "allow"
    )
    assert bash("echo x > ../other-workspace/f", echo) == "deny"
    assert bash("echo x | tee /etc/cron.d/x", echo, ("allow", "Bash(tee *)")) == "deny"
    assert bash("echo x >> out/a 2>/dev/null", echo, ("allow", "Edit(./out/**)")) == "allow"
    assert bash("echo x > $TARGET", echo) == "ask"
    assert bash("cd /etc && echo x > passwd", echo, ("allow", "Bash(cd *)")) == "ask"
    assert bash("echo x > work/k", echo, ("deny", "Edit(./work/**)")) == "deny"
    assert bash("echo x 2>&1", echo) == "allow"


def test_allow_rules_still_allow_ordinary_commands() -> None:
    assert bash("git status && git diff", ("allow", "Bash(git *)")) == "allow"
    assert bash("ls -la | grep py | wc -l", ("allow", "Bash(ls *)"), ("allow", "Bash(grep *)"),
                ("allow", "Bash(wc *)")) == "allow"  # fmt: skip
    assert bash("python3 -c 'print(1)'", ("allow", "Bash(python3 *)")) == "allow"


def test_skill_run_env_is_checked_and_shown_to_the_rules() -> None:
    with pytest.raises(ToolError, match="BASH_ENV"):
        skill_run_env({"BASH_ENV": "work/.x.sh"})
    for name in ("ENV", "LD_PRELOAD", "PYTHONPATH", "PATH", "IFS", "PS4", "SHELLOPTS",
                 "PROMPT_COMMAND", "HOME", "PERL5OPT", "RUBYOPT", "NODE_OPTIONS", "GIT_SSH_COMMAND",
                 "BASH_FUNC_ls%%", "lower", "GLIBC_TUNABLES"):  # fmt: skip
        with pytest.raises(ToolError):
            skill_run_env({name: "x"})
    assert skill_run_env({"MODE": "fast", "ROWS": 10}) == {"MODE": "fast", "ROWS": "10"}
    shown = command_with_env({"MODE": "a b"}, "python3 run.py")
    assert shown == "MODE='a b' python3 run.py"
    assert bash(shown, ("allow", "Bash(python3 *)")) == "ask"  # the env is not pre-approved
    assert bash(shown, ("allow", "Bash(MODE=* python3 *)")) == "allow"
    assert bash(command_with_env({"MODE": "x"}, "rm -rf work"), DENY_RM) == "deny"


async def test_bash_refuses_code_loading_variables_even_from_the_server_side(tmp_path) -> None:
    ws = Workspace(tmp_path / "w")
    (ws.work_dir / ".x.sh").write_text("echo PWNED > work/pwned\n")
    ctx_ = ToolContext(workspace=ws, env={"BASH_ENV": str(ws.work_dir / ".x.sh")})
    with pytest.raises(ToolError, match="BASH_ENV"):
        await BashTool().run({"command": "true"}, ctx_)
    assert not (ws.work_dir / "pwned").exists()


async def test_read_deny_rules_filter_grep_and_glob_file_by_file(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "w")
    (ws.work_dir / "secret").mkdir()
    (ws.work_dir / "secret" / "k.md").write_text("CANARY secret\n")
    (ws.work_dir / "open.md").write_text("CANARY open\n")
    context = PermissionContext(
        workspace=ws.root, admin_rules=[parse_rule("Read(./work/secret/**)", "deny")]
    )
    # The search itself is allowed (its root is not denied)...
    assert decide(ToolCall("Grep", {"pattern": "CANARY"}), context).behavior == "allow"
    tool_ctx = ToolContext(workspace=ws, path_allowed=read_filter(context))
    grep = await GrepTool().run({"pattern": "CANARY", "output_mode": "content"}, tool_ctx)
    glob = await GlobTool().run({"pattern": "**/*.md"}, tool_ctx)
    # ...but the denied file's content and name are not in its results.
    assert "secret" not in grep.content and "CANARY open" in grep.content
    assert "secret" not in glob.content and "work/open.md" in glob.content
    # Positive control: without the filter both would show it.
    plain = await GrepTool().run({"pattern": "CANARY"}, ToolContext(workspace=ws))
    assert "work/secret/k.md" in plain.content


def test_every_simple_command_is_found() -> None:
    found = {c.words[0] for c in analyze("a | b && (c; { d; }) || $(e) `f` <(g)").commands}
    assert found == {"a", "b", "c", "d", "e", "f", "g", "$(e)"}  # `$(e)` names a command too


# --- properties ---------------------------------------------------------------------------

# Wrappers around any command list...
WRAP = [
    "( {} )",
    "{{ {}; }}",
    "true && {}",
    "false || {}",
    "echo x | {}",
    "{} | cat",
    "if true; then {}; fi",
    "while true; do {}; break; done",
    "for i in 1; do {}; done",
    "case a in a) {};; esac",
    "echo $( {} )",
    "f() {{ {}; }}; f",
    "cat <( {} )",
]
# ...and programs that run the simple command that follows them.
PREFIX = [
    "env {}",
    "env -i A=1 {}",
    "command {}",
    "nice {}",
    "nohup {}",
    "timeout 5 {}",
    "time {}",
    "exec {}",
    "stdbuf -oL {}",
    "sudo {}",
    "xargs {}",
    "! {}",
]
SHELL_WRAP = ["bash -c {}", "sh -c {}", "eval {}", "bash -lc {}"]
NAMES = ["rm", "\\rm", "r''m", "'rm'", '"rm"', "r\\m", "/bin/rm", "/usr/bin/rm", "$'rm'"]


def shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


@st.composite
def wrapped_rm(draw: st.DrawFn) -> str:
    command = f"{draw(st.sampled_from(NAMES))} {draw(st.sampled_from(['-rf work', 'x', '-f a b']))}"
    simple = True  # a prefix wrapper needs a simple command after it, as in the shell
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["wrap", "shell", "prefix"] if simple else ["wrap", "shell"]))
        if kind == "prefix":
            command = draw(st.sampled_from(PREFIX)).format(command)
        elif kind == "wrap":
            command, simple = draw(st.sampled_from(WRAP)).format(command), False
        else:
            command = draw(st.sampled_from(SHELL_WRAP)).format(shell_quote(command))
            simple = True
    return command


@settings(max_examples=400, deadline=None)
@given(command=wrapped_rm(), allow_all=st.booleans())
def test_random_wrappings_of_a_denied_command_stay_denied(command: str, allow_all: bool) -> None:
    rules = [DENY_RM, ("allow", "Bash")] if allow_all else [DENY_RM]
    assert bash(command, *rules) == "deny", command


@settings(max_examples=200, deadline=None)
@given(command=st.text(max_size=80))
def test_arbitrary_text_never_crashes_and_unparsable_text_is_never_allowed(command: str) -> None:
    analysis = analyze(command)
    decision = bash(command, ("allow", "Bash(echo *)"), DENY_RM)
    if analysis.opaque:
        assert decision != "allow"
