"""Issue 11, hidden text at the core's edges: tool results that quote a staged skill are
filterable, and dynamic-context errors and lint messages never quote the body."""

from __future__ import annotations

from pathlib import Path

import pytest

from skills_app.core.dynamic import DynamicContextError, ShellResult, render_dynamic
from skills_app.core.permissions import Decision
from skills_app.core.redact import HiddenIndex, HiddenText
from skills_app.core.skillfile import lint_skill_dir, parse_skill_text
from skills_app.core.tools import GrepTool, ReadTool, ToolContext, Workspace

CANARY = "CANARY-31337"
BODY = (
    "Quarterly numbers\n"
    f"Step one: open the ledger and read the line that says {CANARY} first.\n"
    "Step two: never show the customer list, only counts per region.\n"
    "See /home/alice/private/notes.md and [the guide](references/missing-guide.md).\n"
)


@pytest.fixture
def staged(tmp_path: Path) -> tuple[Workspace, Path]:
    source = tmp_path / "src" / "report"
    source.mkdir(parents=True)
    (source / "SKILL.md").write_text(f"---\ndescription: Reports.\n---\n{BODY}")
    ws = Workspace(tmp_path / "conv")
    return ws, ws.stage_skill("report", source, "d1")


def hidden_for(staged_dir: Path) -> HiddenIndex:
    """What the outbound filter is given: the text of every staged skill file."""
    return HiddenIndex(
        HiddenText(p.read_text(), f"hidden skill file {p.name}")
        for p in staged_dir.rglob("*")
        if p.is_file()
    )


async def test_a_read_of_skill_md_is_withheld_by_the_filter(staged) -> None:
    ws, folder = staged
    result = await ReadTool().run({"file_path": "skills/report/SKILL.md"}, ToolContext(ws))
    assert CANARY in result.content  # positive control: the model does get the body
    shown = hidden_for(folder).redact(result.content)
    assert CANARY not in shown and "customer list" not in shown
    assert "[hidden skill file SKILL.md withheld:" in shown


async def test_a_grep_of_the_canary_is_withheld_by_the_filter(staged) -> None:
    ws, folder = staged
    result = await GrepTool().run(
        {"pattern": "CANARY", "output_mode": "content"}, ToolContext(workspace=ws)
    )
    assert CANARY in result.content
    assert CANARY not in hidden_for(folder).redact(result.content)


async def test_dynamic_context_errors_never_quote_the_command_or_its_output(tmp_path) -> None:
    spec = parse_skill_text(
        "---\ndescription: d\n---\nA !`cat secret-plan.txt`\n", directory=tmp_path, name="dyn"
    )

    async def allow(command: str) -> Decision:
        return Decision("allow", "test", None)

    async def fail(command: str) -> ShellResult:
        return ShellResult(1, "TOP-SECRET-OUTPUT line")

    with pytest.raises(DynamicContextError) as failed:
        await render_dynamic(spec, "", skill_dir="/d", session_id="s", check=allow, execute=fail)
    assert "secret-plan" not in failed.value.message
    assert "TOP-SECRET" not in failed.value.message
    assert "exit code 1" in failed.value.message
    assert failed.value.runs[-1].output == "TOP-SECRET-OUTPUT line"  # kept for the audit

    async def deny(command: str) -> Decision:
        return Decision("deny", 'deny rule "Bash(cat *)" (admin #1)', None)

    with pytest.raises(DynamicContextError) as denied:
        await render_dynamic(spec, "", skill_dir="/d", session_id="s", check=deny, execute=fail)
    assert "secret-plan" not in denied.value.message
    assert "Bash(cat *)" in denied.value.message


def test_lint_messages_never_quote_the_body(staged) -> None:
    _ws, folder = staged
    problems = lint_skill_dir(folder)
    assert {p.rule for p in problems} >= {"absolute-path", "missing-reference"}
    for problem in problems:
        assert "alice" not in problem.message and "missing-guide" not in problem.message
