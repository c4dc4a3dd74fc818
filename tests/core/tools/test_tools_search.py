from __future__ import annotations

import os
from pathlib import Path

import pytest

from skills_app.core.tools import (
    GlobTool,
    GrepTool,
    ToolContext,
    ToolError,
    Workspace,
    WorkspaceError,
)
from skills_app.core.tools.search import GLOB_LIMIT, GREP_LINE_LIMIT, expand_braces


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    ws = Workspace(tmp_path / "conv")
    (ws.work_dir / "src").mkdir()
    (ws.work_dir / "src" / "app.py").write_text("import os\nprint('Hello')\n")
    (ws.work_dir / "src" / "util.py").write_text("def hello():\n    return 'hello'\n")
    (ws.work_dir / "notes.md").write_text("# Notes\nsay hello\n")
    (ws.out_dir / "report.md").write_text("done\n")
    return ws


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.md").write_text("hello secret\n")
    return folder


def test_it_expands_braces() -> None:
    assert expand_braces("*.{md,py}") == ["*.md", "*.py"]
    assert expand_braces("{a,b}/{c,d}") == ["a/c", "a/d", "b/c", "b/d"]
    assert expand_braces("plain") == ["plain"]


# --- Glob ---------------------------------------------------------------------------------


async def test_it_globs_recursively_newest_first(ws: Workspace, ctx: ToolContext) -> None:
    os.utime(ws.work_dir / "src" / "app.py", (1_000, 1_000))
    os.utime(ws.work_dir / "src" / "util.py", (2_000, 2_000))
    result = await GlobTool().run({"pattern": "**/*.py"}, ctx)
    assert result.content.splitlines() == ["work/src/util.py", "work/src/app.py"]


async def test_it_globs_from_a_path_with_braces(ctx: ToolContext) -> None:
    result = await GlobTool().run({"pattern": "*.{md,txt}", "path": "work"}, ctx)
    assert result.content.splitlines() == ["work/notes.md"]


async def test_it_marks_folders_and_says_when_nothing_matches(ctx: ToolContext) -> None:
    result = await GlobTool().run({"pattern": "work/*"}, ctx)
    assert "work/src/" in result.content.splitlines()
    empty = await GlobTool().run({"pattern": "*.nothing"}, ctx)
    assert empty.content.startswith("No files match")


async def test_it_caps_glob_results(ws: Workspace, ctx: ToolContext) -> None:
    many = ws.work_dir / "many"
    many.mkdir()
    for i in range(GLOB_LIMIT + 5):
        (many / f"f{i}.txt").write_text("")
    result = await GlobTool().run({"pattern": "*.txt", "path": "work/many"}, ctx)
    lines = result.content.splitlines()
    assert len(lines) == GLOB_LIMIT + 1
    assert lines[-1] == "(5 more not shown; narrow the pattern or the path)"


async def test_it_never_globs_outside_the_workspace(
    ws: Workspace, ctx: ToolContext, outside: Path
) -> None:
    (ws.work_dir / "escape").symlink_to(outside)
    result = await GlobTool().run({"pattern": "work/escape/*"}, ctx)
    assert "secret" not in result.content
    dotdot = await GlobTool().run({"pattern": "../outside/*"}, ctx)
    assert "secret" not in dotdot.content
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        await GlobTool().run({"pattern": "*", "path": "../outside"}, ctx)
    with pytest.raises(ToolError, match="must be relative"):
        await GlobTool().run({"pattern": "/etc/*"}, ctx)


# --- Grep ---------------------------------------------------------------------------------


async def test_it_lists_files_with_matches_by_default(ctx: ToolContext) -> None:
    result = await GrepTool().run({"pattern": "hello"}, ctx)
    assert result.content.splitlines() == ["work/notes.md", "work/src/util.py"]


async def test_it_shows_content_with_line_numbers_ignoring_case(ctx: ToolContext) -> None:
    result = await GrepTool().run(
        {"pattern": "hello", "ignore_case": True, "output_mode": "content", "glob": "*.py"}, ctx
    )
    assert result.content.splitlines() == [
        "work/src/app.py:2:print('Hello')",
        "work/src/util.py:1:def hello():",
        "work/src/util.py:2:    return 'hello'",
    ]


async def test_it_counts_matches(ctx: ToolContext) -> None:
    result = await GrepTool().run(
        {"pattern": "hello", "output_mode": "count", "path": "work/src"}, ctx
    )
    assert result.content.splitlines()[0] == "work/src/util.py:2"
    assert "2 matching lines in 1 files" in result.content


async def test_it_searches_a_single_file(ctx: ToolContext) -> None:
    result = await GrepTool().run({"pattern": "Notes", "path": "work/notes.md"}, ctx)
    assert result.content == "work/notes.md"


async def test_it_skips_binary_files_and_git(ws: Workspace, ctx: ToolContext) -> None:
    (ws.work_dir / "blob.bin").write_bytes(b"hello\x00world")
    (ws.work_dir / ".git").mkdir()
    (ws.work_dir / ".git" / "config").write_text("hello\n")
    result = await GrepTool().run({"pattern": "hello", "path": "work"}, ctx)
    assert "blob.bin" not in result.content
    assert ".git" not in result.content
    assert "1 binary or oversized files skipped" in result.content


async def test_it_caps_content_results_and_says_what_was_cut(
    ws: Workspace, ctx: ToolContext
) -> None:
    (ws.work_dir / "big.txt").write_text("match\n" * (GREP_LINE_LIMIT + 7))
    result = await GrepTool().run(
        {"pattern": "match", "path": "work/big.txt", "output_mode": "content"}, ctx
    )
    assert (
        len([line for line in result.content.splitlines() if line.startswith("work/")])
        == GREP_LINE_LIMIT
    )
    assert "7 more matching lines not shown" in result.content


async def test_it_never_greps_through_a_symlink_leading_out(
    ws: Workspace, ctx: ToolContext, outside: Path
) -> None:
    (ws.work_dir / "escape").symlink_to(outside)
    (ws.work_dir / "secret-link.md").symlink_to(outside / "secret.md")
    result = await GrepTool().run({"pattern": "secret"}, ctx)
    assert result.content.startswith("No matches")
    with pytest.raises(WorkspaceError, match="symbolic link"):
        await GrepTool().run({"pattern": "secret", "path": "work/escape"}, ctx)


async def test_it_reports_a_bad_regex_and_a_missing_path(ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match="invalid regular expression"):
        await GrepTool().run({"pattern": "("}, ctx)
    with pytest.raises(ToolError, match="does not exist"):
        await GrepTool().run({"pattern": "x", "path": "work/missing"}, ctx)
