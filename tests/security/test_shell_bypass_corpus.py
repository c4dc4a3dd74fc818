"""Every shell bypass ever found, replayed on every run (issue 23).

`shell_bypass_corpus.json` holds one entry per line: the command, the rules it was tried under,
the decision the engine must give (`expect`), the programs bash really starts when it runs it
(`runs`, checked with the oracle of `shell_oracle.py`), where it was found (the issue, an attack
of our own, or `test_shell_differential.py`) and what catches it. A new bypass goes in as a new
line; controls (`expect: allow`) keep the engine from passing by refusing everything.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from skills_app.core.permissions import PermissionContext, ToolCall, decide, parse_rule
from tests.security.shell_oracle import Oracle, available

CORPUS = Path(__file__).with_name("shell_bypass_corpus.json")
ENTRIES: list[dict[str, Any]] = json.loads(CORPUS.read_text(encoding="utf-8"))
WS = Path("/srv/ws/conv-1")


def _decide(entry: dict[str, Any]) -> tuple[str, str]:
    rules = [parse_rule(text, behavior) for behavior, text in entry["rules"]]
    context = PermissionContext(workspace=WS, admin_rules=rules)
    decision = decide(ToolCall("Bash", {"command": entry["command"]}), context)
    return decision.behavior, decision.reason


def _id(entry: dict[str, Any]) -> str:
    return entry["command"].replace("\n", "\\n")[:60]


def test_the_corpus_holds_the_bypasses_of_issue_23() -> None:
    commands = {e["command"] for e in ENTRIES}
    for command in (
        "x='$(rm work/v1)'; echo ${x@P}",
        "x='a[$(rm work/v2)]'; echo $((x))",
        "declare -i n; n='a[$(rm work/v3; id > out/pwned.txt)]'; echo $n",
        '"$(printf rm)" x', "a=rm; $a x", "find . -delete", "{rm,x}", "coproc rm x",
        "r\\\nm x", '$"rm" x', "rm${IFS}x", "env --split-string='rm x'",
    ):  # fmt: skip
        assert command in commands
    assert all(set(e) >= {"command", "rules", "expect", "runs", "found", "fix"} for e in ENTRIES)


@pytest.mark.parametrize("entry", ENTRIES, ids=_id)
def test_the_engine_decides_each_known_bypass_as_recorded(entry: dict[str, Any]) -> None:
    behavior, reason = _decide(entry)
    assert behavior == entry["expect"], reason
    assert reason  # every decision says why


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e["expect"] == "deny"], ids=_id)
def test_a_refusal_says_what_made_it_dynamic_or_which_rule(entry: dict[str, Any]) -> None:
    _, reason = _decide(entry)
    assert 'rule "Bash(rm *)"' in reason or "deny rule" in reason


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Oracle:
    why = available()
    if why:
        pytest.skip(why)
    return Oracle(tmp_path_factory.mktemp("oracle"))


@pytest.mark.parametrize("entry", ENTRIES, ids=_id)
def test_bash_runs_what_the_corpus_says_and_the_engine_holds(
    oracle: Oracle, entry: dict[str, Any]
) -> None:
    ran = oracle.run(entry["command"])
    programs = ran.programs()
    if not entry.get("racy"):
        # The entry is a real bypass: bash does start these programs (positive control).
        assert programs >= set(entry["runs"]), ran.output
    behavior, _ = _decide(entry)
    denies_rm = ["deny", "Bash(rm *)"] in entry["rules"]
    if denies_rm and "rm" in programs:
        assert behavior == "deny"
    allowed = {t[len("Bash(") : -len(" *)")] for b, t in entry["rules"] if b == "allow"}
    if behavior == "allow" and "Bash" not in {t for _, t in entry["rules"]}:
        assert programs <= allowed
