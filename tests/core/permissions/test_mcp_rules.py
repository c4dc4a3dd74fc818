"""MCP rules in the rule tester and the rule checks: which rule decides an `mcp__` call and why,
and which `mcp__` rules match nothing (pure: no server is started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from skills_app.core.permissions import RuleSyntaxError, parse_call, parse_rule
from skills_app.core.permissions.rules import mcp_rule_problem
from skills_app.core.permissions.tester import read_call

SERVERS = {
    "tickets": frozenset({"get_ticket", "get_comments", "close_ticket"}),
    "wiki": frozenset(),
}


def _read(call: str, *rules: tuple[str, str], servers=SERVERS, skill_rules=()):
    admin = [parse_rule(t, b, rule_id=i + 1) for i, (b, t) in enumerate(rules)]
    return read_call(
        parse_call(call),
        admin_rules=admin,
        skill="",
        skill_rules=skill_rules,
        workspace=Path("/workspace"),
        mcp_servers=servers,
    )


def test_an_mcp_call_no_rule_names_asks_and_the_tester_says_why() -> None:
    reading = _read("mcp__tickets__get_ticket", ("allow", "mcp__wiki"), ("deny", "Bash(rm *)"))
    assert reading.decision.behavior == "ask"
    assert reading.decision.rule is None
    assert "as for every MCP tool no rule names" in reading.decision.reason
    assert reading.call_note.startswith("No rule names mcp__tickets__get_ticket")
    assert "an MCP call no rule names asks" in reading.call_note


def test_deny_wins_and_the_tester_names_every_rule_that_names_the_tool() -> None:
    reading = _read(
        "mcp__tickets__close_ticket",
        ("allow", "mcp__tickets"),
        ("allow", "mcp__tickets__close_*"),
        ("deny", "mcp__tickets__close_ticket"),
        ("allow", "mcp__tickets__get_*"),
    )
    assert reading.decision.behavior == "deny"
    assert reading.decision.rule is not None and reading.decision.rule.rule_id == 3
    note = reading.call_note
    assert 'allow rule "mcp__tickets" (admin #1)' in note
    assert 'allow rule "mcp__tickets__close_*" (admin #2)' in note
    assert 'deny rule "mcp__tickets__close_ticket" (admin #3)' in note
    assert "get_*" not in note  # does not name this tool
    assert "Deny wins over ask and allow, whatever their order." in note


def test_a_skill_rule_naming_the_tool_is_named_too() -> None:
    granted = parse_rule("mcp__tickets__get_*", "allow", source="skill", scope_skill="triage")
    reading = _read("mcp__tickets__get_ticket", skill_rules=(granted,))
    assert reading.decision.behavior == "allow"
    assert 'allowed-tools of skill "triage": mcp__tickets__get_*' in reading.call_note


def test_the_tester_says_when_the_server_or_the_tool_does_not_exist() -> None:
    unknown = _read("mcp__tracker__get_ticket")
    assert "No MCP server named 'tracker' is registered" in unknown.call_note
    missing = _read("mcp__tickets__delete_ticket")
    assert "lists no tool named 'delete_ticket'" in missing.call_note


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("mcp__tracker", "No MCP server named 'tracker' is registered"),
        ("mcp__tracker__*", "No MCP server named 'tracker' is registered"),
        ("mcp__tickets__put_*", "No tool of the MCP server 'tickets' starts with 'put_'"),
        ("mcp__tickets__get_tiket", "Did you mean mcp__tickets__get_ticket?"),
        ("mcp__wiki__search", "lists no tool named 'search'"),
    ],
)
def test_an_mcp_rule_naming_no_registered_server_or_tool_matches_nothing(
    text: str, problem: str
) -> None:
    found = mcp_rule_problem(parse_rule(text, "allow"), SERVERS)
    assert found is not None and problem in found


@pytest.mark.parametrize(
    "text", ["mcp__tickets", "mcp__tickets__*", "mcp__tickets__get_*", "mcp__tickets__get_ticket"]
)
def test_an_mcp_rule_naming_what_exists_has_no_problem(text: str) -> None:
    assert mcp_rule_problem(parse_rule(text, "deny"), SERVERS) is None


def test_the_tester_lists_the_mcp_rules_that_match_nothing() -> None:
    reading = _read(
        "mcp__tickets__get_ticket", ("allow", "mcp__tickets__get_*"), ("deny", "mcp__tracker")
    )
    assert [
        (r.text, "No MCP server named 'tracker'" in why) for r, why in reading.never_matching
    ] == [("mcp__tracker", True)]


@pytest.mark.parametrize("text", ["mcp__tickets__a*b", "mcp__tick*__get"])
def test_a_star_inside_an_mcp_name_is_refused_with_why(text: str) -> None:
    with pytest.raises(RuleSyntaxError, match=r"a \* may only end the name"):
        parse_rule(text)
