"""Rules that can never match a call Skillscope makes: which, and what to write instead.

The engine's own decisions are the judge: a rule said to match decides a sample call with
`decide()`, and an allow rule said never to match does not allow the command it seems to name.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from skills_app.core.permissions import (
    KNOWN_TOOLS,
    PermissionContext,
    RuleSyntaxError,
    ToolCall,
    decide,
    parse_rule,
)
from skills_app.core.permissions.rules import never_matches, undecided_reason
from skills_app.core.profiles import PROFILES
from skills_app.core.tools import default_tools

WORKSPACE = Path("/workspace")

# The tools whose calls the rules decide under their own name: the ordinary tools, Skill, and
# the delivery profiles' skill loaders (tool-result's load_skill; system-prompt's skill_load
# "as the source design", Skill(NAME) otherwise). Every other tool a profile offers is decided
# as one of these (skill_run as Bash(command) and Skill(NAME)) or needs no decision.
DECIDED_TOOLS = (
    "Read",
    "Write",
    "Edit",
    "Glob",
    "Grep",
    "Bash",
    "Skill",
    "load_skill",
    "skill_load",
)

# Every tool name the rules know, bare and with a specifier: None when such a rule can match,
# else a piece of the message that says what to write instead.
TABLE: list[tuple[str, str | None]] = [
    ("Read", None),
    ("Read(./docs/**)", None),
    ("Write", None),
    ("Edit", None),
    ("Edit(./out/**)", None),
    ("Glob", None),
    ("Grep", None),
    ("Bash", None),
    ("Bash(git diff *)", None),
    ("Skill", None),
    ("Skill(pdf)", None),
    ("load_skill", None),
    ("load_skill(pdf)", None),
    ("skill_load", None),
    ("skill_load(pdf)", None),
    ("Task", "write Skill(NAME) instead"),
    ("Task(reviewer)", "write Skill(NAME) instead"),
    ("Agent", "a skill with `context: fork` runs as a subagent"),
    ("Agent(reviewer)", "write Skill(NAME) instead"),
    ("WebFetch", "write Bash(curl https://example.com/*) instead"),
    ("WebFetch(domain:example.com)", "Skillscope has no WebFetch tool"),
    ("WebSearch", "Skillscope has no WebSearch tool"),
    ("WebSearch(weather)", "remove the rule"),
    ("NotebookEdit", "write Edit(./**/*.ipynb) instead"),
    ("NotebookEdit(./a.ipynb)", "write Edit(./a.ipynb) instead"),
    ("TodoWrite", "Skillscope has no TodoWrite tool"),
    ("TodoWrite(x)", "remove the rule"),
    ("skill_select_docs", "write Skill(NAME) instead"),
    ("skill_select_docs(pdf)", "write Skill(pdf) instead"),
    ("skill_run", "decided by Bash(...) rules and its skill by Skill(NAME) rules"),
    ("skill_run(python3 scripts/fill.py *)", "write Bash(python3 scripts/fill.py *)"),
]


def test_the_table_names_every_tool_the_rules_know():
    named = {text.split("(")[0] for text, _ in TABLE}
    assert named == set(KNOWN_TOOLS)


@pytest.mark.parametrize(("text", "expected"), TABLE)
@pytest.mark.parametrize("behavior", ["allow", "ask", "deny"])
def test_it_says_which_rules_can_never_match_for_every_tool_name(text, expected, behavior):
    found = never_matches(parse_rule(text, behavior))
    if expected is None:
        assert found is None
    else:
        assert found is not None and expected in found
        assert found.startswith(f"{text.split('(')[0]} rules are never consulted: ")


@pytest.mark.parametrize(
    ("text", "fix"),
    [
        ("Write(**)", "writes are decided by Edit(...) rules, as in Claude Code; write Edit(**)"),
        ("Write(./out/*.md)", "write Edit(./out/*.md) instead, or the bare tool name Write"),
        ("Glob(src/**)", "searches are decided by Read(...) rules; write Read(src/**) instead"),
        ("Grep(src/**)", "write Read(src/**) instead, or the bare tool name Grep"),
    ],
)
def test_a_specifier_on_a_tool_decided_by_another_tools_rules_is_refused_with_the_fix(text, fix):
    with pytest.raises(RuleSyntaxError) as refused:
        parse_rule(text)
    message = str(refused.value)
    assert message.startswith(f"{text.split('(')[0]}(...) rules are never consulted: ")
    assert fix in message


def test_every_tool_a_model_is_offered_is_decided_by_its_name_or_explained():
    offered = set(default_tools().names())
    for profile in PROFILES.values():
        offered |= set(profile.tool_names)
    for name in offered & set(KNOWN_TOOLS):
        assert (name in DECIDED_TOOLS) != (undecided_reason(name) is not None), name
    # The ordinary tools are all decided by their own rules.
    assert set(default_tools().names()) <= set(DECIDED_TOOLS)


@pytest.mark.parametrize(
    ("tool", "call_input"),
    [
        ("Read", {"file_path": "a.txt"}),
        ("Write", {"file_path": "a.txt"}),
        ("Edit", {"file_path": "a.txt"}),
        ("Glob", {"pattern": "*.txt"}),
        ("Grep", {"pattern": "x"}),
        ("Bash", {"command": "ls"}),
        ("Skill", {"skill": "pdf"}),
        ("load_skill", {"skill": "pdf", "args": ""}),
        ("skill_load", {"skill": "pdf", "args": ""}),
    ],
)
def test_a_bare_rule_for_a_decided_tool_decides_its_calls(tool, call_input):
    rule = parse_rule(tool, "deny")
    assert never_matches(rule) is None
    context = PermissionContext(workspace=WORKSPACE, admin_rules=(rule,))
    assert decide(ToolCall(tool, call_input), context).rule == rule


# An allow rule is matched against each simple command of a line on its own, as written
# without its redirections: a pattern that spans more never allows.
BASH_ALLOWS: list[tuple[str, str, str | None]] = [
    ("cd * && make", "cd src && make", "Bash(cd *), Bash(make)"),
    ("ls * | grep foo", "ls src | grep foo", "Bash(ls *), Bash(grep foo)"),
    ("make *; make install", "make all; make install", "Bash(make *), Bash(make install)"),
    ("python3 gen.py * > out/report.md", "python3 gen.py a > out/report.md", "Edit(...)"),
    ("ls # *", "ls # a comment", "Bash(ls)"),
    ("git diff *", "git diff HEAD", None),
    ("FOO=1 make *", "FOO=1 make all", None),
    ("timeout 5 make *", "timeout 5 make all", None),
    ('git commit -m "* && y"', 'git commit -m "x && y"', None),
    ("echo $(date) *", "echo $(date) now", None),
]


@pytest.mark.parametrize(("spec", "command", "fix"), BASH_ALLOWS)
def test_an_allow_rule_spanning_several_commands_is_said_never_to_allow(spec, command, fix):
    rule = parse_rule(f"Bash({spec})", "allow")
    found = never_matches(rule)
    context = PermissionContext(workspace=WORKSPACE, admin_rules=(rule,))
    decided = decide(ToolCall("Bash", {"command": command}), context)
    if fix is None:
        assert found is None
        if "$(" not in command:  # `date` needs a rule of its own
            assert decided.behavior == "allow"
    else:
        assert found is not None and fix in found
        assert "Bash rules are never consulted" not in found
        assert decided.behavior != "allow"  # the engine agrees: the rule allows nothing here


@pytest.mark.parametrize("behavior", ["ask", "deny"])
def test_deny_and_ask_rules_spanning_several_commands_still_match_the_whole_line(behavior):
    rule = parse_rule("Bash(cd * && make)", behavior)
    assert never_matches(rule) is None
    context = PermissionContext(workspace=WORKSPACE, admin_rules=(rule,))
    decided = decide(ToolCall("Bash", {"command": "cd src && make"}), context)
    assert decided.behavior == behavior


def test_an_exact_allow_of_a_whole_line_can_match():
    rule = parse_rule("Bash(cd src && make)", "allow")
    assert never_matches(rule) is None
    context = PermissionContext(workspace=WORKSPACE, admin_rules=(rule,))
    assert decide(ToolCall("Bash", {"command": "cd src && make"}), context).behavior == "allow"


def test_mcp_rules_are_left_to_the_servers_registered_at_run_time():
    assert never_matches(parse_rule("mcp__github__create_issue", "deny")) is None
