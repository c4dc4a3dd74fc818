"""Issue 11, bounded work: a tiny upload or a regex must not freeze the server for everyone."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from skills_app.core.skillfile import SkillFileError, lint_skill_dir, parse_skill_text
from skills_app.core.tools import GlobTool, GrepTool, ToolContext, Workspace
from skills_app.core.upload_checks import Limits, find_skills, read_zip


def billion_laughs() -> str:
    """A SKILL.md whose frontmatter nests YAML aliases 10 wide and 7 deep (10^7 nodes)."""
    lines = ["---", "name: lol", "description: laughs"]
    lines.append("lol0: &lol0 [" + ", ".join(['"lol"'] * 10) + "]")
    for level in range(1, 7):
        refs = ", ".join([f"*lol{level - 1}"] * 10)
        lines.append(f"lol{level}: &lol{level} [{refs}]")
    return "\n".join([*lines, "---", "Body.", ""])


def test_the_billion_laughs_skill_is_refused_fast(tmp_path: Path) -> None:
    text = billion_laughs()
    assert len(text.encode()) < 700
    folder = tmp_path / "lol"
    folder.mkdir()
    (folder / "SKILL.md").write_text(text)
    started = time.monotonic()
    with pytest.raises(SkillFileError) as refused:
        parse_skill_text(text, directory=folder, name="lol")
    problems = lint_skill_dir(folder)
    assert time.monotonic() - started < 1.0
    assert refused.value.problem.rule == "yaml-alias"
    assert "anchor" in refused.value.problem.message and "alias" in refused.value.problem.message
    assert [p.rule for p in problems] == ["yaml-alias"]


def test_one_anchor_without_an_alias_is_refused_too(tmp_path: Path) -> None:
    with pytest.raises(SkillFileError, match="anchor"):
        parse_skill_text("---\ndescription: &d text\n---\nb\n", directory=tmp_path, name="x")


def test_oversized_and_deeply_nested_frontmatter_are_refused(tmp_path: Path) -> None:
    big = "---\ndescription: d\nmetadata: '" + "x" * 70_000 + "'\n---\nb\n"
    with pytest.raises(SkillFileError) as refused:
        parse_skill_text(big, directory=tmp_path, name="x")
    assert refused.value.problem.rule == "frontmatter-size"
    deep = "---\ndescription: d\nmetadata: " + "[" * 40 + "]" * 40 + "\n---\nb\n"
    with pytest.raises(SkillFileError) as nested:
        parse_skill_text(deep, directory=tmp_path, name="x")
    assert nested.value.problem.rule == "yaml-depth"


def test_an_upload_reads_the_name_with_the_same_bounded_parser() -> None:
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("SKILL.md", billion_laughs())
    limits = Limits(max_total_bytes=10**7, max_files=100, max_file_bytes=10**6, max_ratio=1000)
    started = time.monotonic()
    members = read_zip(buffer.getvalue(), "upload.zip", limits)
    layout = find_skills(members, stem="upload")
    assert time.monotonic() - started < 1.0
    assert layout.skills[0].name == "upload"  # the bomb's `name:` was never built


async def test_grep_of_a_catastrophic_regex_returns_promptly(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "w")
    (ws.work_dir / "a.txt").write_text("a" * 27 + "!\n")
    ctx = ToolContext(workspace=ws)
    started = time.monotonic()
    result = await GrepTool().run({"pattern": "(a+)+$", "output_mode": "content"}, ctx)
    assert time.monotonic() - started < 2.0
    assert result.content.startswith("No matches")


async def test_grep_runs_off_the_event_loop(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "w")
    for i in range(200):
        (ws.work_dir / f"f{i}.txt").write_text(("x" * 200 + "\n") * 500)
    ctx = ToolContext(workspace=ws)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.001)

    task = asyncio.create_task(ticker())
    await GrepTool().run({"pattern": "(x+x+)+y"}, ctx)
    task.cancel()
    assert ticks > 5  # the loop kept serving others while the search ran


async def test_glob_of_a_pathological_pattern_returns_promptly(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "w")
    (ws.work_dir / ("a" * 200)).write_text("")
    started = time.monotonic()
    await GlobTool().run({"pattern": "**/" + "*a" * 30 + "b"}, ToolContext(workspace=ws))
    assert time.monotonic() - started < 2.0
