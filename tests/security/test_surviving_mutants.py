"""Issue 23, the two mutants that survived the suite, each killed by a test of its boundary.

- The outbound filter withholds a common span of exactly MIN_SPAN characters (`<` turned into
  `<=` in the length check let a 40-character hidden span through) and keeps one of MIN_SPAN - 1.
- A Read *ask* rule hides the files it covers from Grep and Glob, as a deny rule does: a search
  must not show what reading would have asked about.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from skills_app.core.permissions import PermissionContext, ToolCall, decide, parse_rule, read_filter
from skills_app.core.redact import MIN_SPAN, HiddenIndex, HiddenText, normalise
from skills_app.core.tools import GlobTool, GrepTool, ToolContext, Workspace

# Letters the surrounding text never uses, so the common span is exactly what the test cuts.
HIDDEN = "QQQQ " + "".join(chr(ord("a") + (i * 7) % 26) for i in range(120)) + " ZZZZ"


def _span(length: int) -> str:
    core = normalise(HIDDEN)[0][5 : 5 + length]
    assert len(core) == length and " " not in core  # no edge the filter would trim
    return core


@pytest.mark.parametrize("length", [MIN_SPAN, MIN_SPAN + 1, 2 * MIN_SPAN])
def test_a_hidden_span_of_min_span_characters_or_more_is_withheld(length: int) -> None:
    span = _span(length)
    index = HiddenIndex([HiddenText(HIDDEN, "hidden skill file x/SKILL.md")])
    shown = index.redact(f"1{span}2")
    assert span not in shown
    assert shown == f"1[hidden skill file x/SKILL.md withheld: {length} characters]2"
    assert index.contains_hidden(f"1{span}2")


def test_a_common_span_one_character_short_of_min_span_is_left_alone() -> None:
    span = _span(MIN_SPAN - 1)
    index = HiddenIndex([HIDDEN])
    assert index.redact(f"1{span}2") == f"1{span}2"
    assert not index.contains_hidden(f"1{span}2")


@pytest.fixture
def searched(tmp_path: Path) -> Workspace:
    ws = Workspace(tmp_path / "w")
    (ws.work_dir / "asked").mkdir()
    (ws.work_dir / "asked" / "plan.md").write_text("CANARY-ASK the plan behind an ask rule\n")
    (ws.work_dir / "open.md").write_text("CANARY-ASK an open note\n")
    return ws


async def test_a_read_ask_rule_hides_its_files_from_grep_and_glob(searched: Workspace) -> None:
    context = PermissionContext(
        workspace=searched.root, admin_rules=[parse_rule("Read(./work/asked/**)", "ask")]
    )
    # Reading the file itself would ask...
    read = ToolCall("Read", {"file_path": str(searched.work_dir / "asked" / "plan.md")})
    assert decide(read, context).behavior == "ask"
    tool_ctx = ToolContext(workspace=searched, path_allowed=read_filter(context))
    grep = await GrepTool().run({"pattern": "CANARY-ASK", "output_mode": "content"}, tool_ctx)
    glob = await GlobTool().run({"pattern": "**/*.md"}, tool_ctx)
    # ...so a search of the whole workspace shows neither its name nor its text.
    assert "plan behind" not in grep.content and "an open note" in grep.content
    assert "asked/plan.md" not in glob.content and "work/open.md" in glob.content
    # Positive control: without the rule the same searches show it.
    plain = PermissionContext(workspace=searched.root, admin_rules=[])
    open_ctx = ToolContext(workspace=searched, path_allowed=read_filter(plain))
    shown = await GrepTool().run({"pattern": "CANARY-ASK", "output_mode": "content"}, open_ctx)
    assert "plan behind" in shown.content


async def test_a_read_allow_rule_hides_nothing(searched: Workspace) -> None:
    context = PermissionContext(
        workspace=searched.root, admin_rules=[parse_rule("Read(./work/asked/**)", "allow")]
    )
    tool_ctx = ToolContext(workspace=searched, path_allowed=read_filter(context))
    glob = await GlobTool().run({"pattern": "**/*.md"}, tool_ctx)
    assert "work/asked/plan.md" in glob.content
