"""Issue 23, Medium: exponential globbing, and walks that outlived Stop.

The attack: `output_files: ["**/**/**/**/**/**/**/**/**/**/**/**/zz"]` over a 25-level folder ran
for over a minute at 55-68 % of a core and kept running after Stop (a recursive matcher tries
every way to split the path among the `**`s). Output globs, Glob, Grep and the artifact listing
now match in linear time (RE2), stop at limits on depth, entries visited and time with a note
that says which, and a cancelled call stops its walk (a flag the walking thread checks).
"""

from __future__ import annotations

import asyncio
import fnmatch
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skills_app.core.profiles import run_files
from skills_app.core.profiles.run_files import collect_outputs, output_matcher
from skills_app.core.tools import GlobTool, GrepTool, ToolContext, Workspace
from skills_app.core.tools import walk as walk_module

ATTACK = "**/**/**/**/**/**/**/**/**/**/**/**/zz"


def deep(ws: Workspace, levels: int, *, files_per_level: int = 2) -> Path:
    """work/d1/d2/.../d<levels>, with a few files at every level; the deepest folder."""
    folder = ws.work_dir
    for level in range(1, levels + 1):
        folder = folder / f"d{level}"
        folder.mkdir()
        for n in range(files_per_level):
            (folder / f"f{n}.txt").write_text(f"level {level} file {n}\n")
    return folder


def test_the_issues_output_glob_over_25_levels_finishes_at_once(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "w")
    deep(ws, 25)
    started = time.monotonic()
    files, note = collect_outputs(ws, [ATTACK], {})
    assert time.monotonic() - started < 2.0
    assert files == [] and note == ""


def test_the_linear_matcher_still_finds_what_the_globs_name(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "w")
    bottom = deep(ws, 25)
    (bottom / "zz").write_text("found me\n")
    (ws.out_dir / "report.md").write_text("# report\n")
    files, _note = collect_outputs(ws, [ATTACK, "$OUTPUT_DIR/*.md"], {"OUTPUT_DIR": "out"})
    names = [f["name"] for f in files]
    assert names == ["out/report.md", f"{ws.relative(bottom)}/zz"]
    assert files[1]["content"] == "found me\n"


def test_a_walk_past_the_entry_limit_says_so(tmp_path: Path, monkeypatch) -> None:
    ws = Workspace(tmp_path / "w")
    for n in range(120):
        (ws.work_dir / f"n{n:03d}.txt").write_text("x\n")
    monkeypatch.setattr(run_files, "MAX_WALKED", 50)
    files, note = collect_outputs(ws, ["work/*.txt"], {})
    assert 0 < len(files) <= 50
    assert "50 entries" in note and "narrow" in note


def test_folders_below_the_depth_limit_are_not_walked_and_the_note_says_so(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr(walk_module, "SEARCH_MAX_DEPTH", 10)
    ws = Workspace(tmp_path / "w")
    bottom = deep(ws, 14, files_per_level=1)
    (bottom / "zz").write_text("too deep\n")
    files, note = collect_outputs(ws, ["**/zz", "**/f0.txt"], {})
    depths = [f["name"].count("/") for f in files]
    assert files and max(depths) <= 11  # work/ + 10 levels
    assert "10 folder levels" in note


async def test_glob_and_grep_of_the_attack_over_25_levels_finish_at_once(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "w")
    deep(ws, 25)
    ctx = ToolContext(workspace=ws)
    started = time.monotonic()
    glob = await GlobTool().run({"pattern": ATTACK}, ctx)
    grep = await GrepTool().run({"pattern": "level", "glob": ATTACK}, ctx)
    assert time.monotonic() - started < 3.0
    assert glob.content.startswith("No files match") and grep.content.startswith("No matches")


async def test_glob_past_the_depth_limit_says_so(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(walk_module, "SEARCH_MAX_DEPTH", 5)
    ws = Workspace(tmp_path / "w")
    deep(ws, 8, files_per_level=1)
    result = await GlobTool().run({"pattern": "**/f0.txt"}, ToolContext(workspace=ws))
    assert "work/d1/d2/d3/d4/f0.txt" in result.content
    assert "d6/f0.txt" not in result.content and "5 folder levels" in result.content


@pytest.mark.parametrize("tool", ["Grep", "Glob"])
async def test_stop_ends_the_walk_in_its_thread(tmp_path: Path, tool: str) -> None:
    """The run is cancelled while the walking thread is inside the walk: the thread stops at
    its next entry instead of finishing the walk."""
    ws = Workspace(tmp_path / "w")
    for n in range(300):
        (ws.work_dir / f"n{n:03d}.txt").write_text("needle\n")
    inside, release = threading.Event(), threading.Event()
    seen: list[str] = []
    threads: list[threading.Thread] = []

    def allowed(path: str) -> bool:
        if not seen:
            threads.append(threading.current_thread())
            inside.set()
            release.wait(10)  # hold the walk here until the task has been cancelled
        seen.append(path)
        return True

    ctx = ToolContext(workspace=ws, path_allowed=allowed)
    call = {"pattern": "needle"} if tool == "Grep" else {"pattern": "**/*.txt"}
    runner = GrepTool() if tool == "Grep" else GlobTool()
    task = asyncio.create_task(runner.run(call, ctx))
    assert await asyncio.get_running_loop().run_in_executor(None, inside.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    release.set()
    threads[0].join(5)
    assert not threads[0].is_alive()
    assert len(seen) <= 2  # the entry it was on, and no more


async def test_a_cancelled_output_collection_stops_too(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "w")
    deep(ws, 30)
    budget = walk_module.Budget()
    budget.cancel()  # Stop before it starts: nothing is walked
    files, note = await walk_module.run_cancellable(
        lambda: collect_outputs(ws, ["**/*.txt"], {}, budget=budget), budget
    )
    assert files == [] and "stopped" in note


# --- the linear matcher is the documented glob ---------------------------------------------


def reference_match(pattern: Sequence[str], path: Sequence[str]) -> bool:
    """The old recursive matcher (exponential in the number of `**`), kept as the judge."""
    if not pattern:
        return not path
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(reference_match(rest, path[i:]) for i in range(len(path) + 1))
    return bool(path) and fnmatch.fnmatchcase(path[0], head) and reference_match(rest, path[1:])


segment = st.sampled_from(["a", "b", "ab", "zz", "a.txt", "b.md"])
glob_part = st.sampled_from(["**", "*", "a", "zz", "*.txt", "?", "a*", "[ab]", "[!a]*"])


@settings(max_examples=400, deadline=None)
@given(
    pattern=st.lists(glob_part, min_size=1, max_size=5),
    path=st.lists(segment, min_size=1, max_size=6),
)
def test_the_output_matcher_agrees_with_the_recursive_glob(pattern, path) -> None:
    expected = reference_match(pattern, path)
    assert output_matcher("/".join(pattern))("/".join(path)) is expected


def test_the_artifact_listing_is_bounded_in_depth_and_entries(tmp_path: Path, monkeypatch) -> None:
    from skills_app.core.tools import workspace as workspace_module

    monkeypatch.setattr(workspace_module, "ARTIFACT_MAX_DEPTH", 6)
    monkeypatch.setattr(workspace_module, "ARTIFACT_SCAN_LIMIT", 100)
    ws = Workspace(tmp_path / "w")
    folder = ws.out_dir
    for level in range(1, 12):
        folder = folder / f"d{level}"
        folder.mkdir()
        (folder / "a.txt").write_text("x\n")
    listed = ws.artifacts()
    assert "out/d1/d2/d3/d4/d5/d6/a.txt" in listed
    assert not any("d7/" in p for p in listed)
    for n in range(150):
        (ws.out_dir / f"many-{n:03d}.txt").write_text("x\n")
    listed = ws.artifacts()
    assert 0 < len(listed) <= 100 and listed == ws.artifacts()  # the same ones every time
