"""Issue 11, planted links: a command that replaces out/ or work/ (or a file) with a symlink to the
server's var/ gets nothing served, listed, chmod-ed or written outside the workspace."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from skills_app.core.tools import (
    ReadTool,
    ToolContext,
    Workspace,
    WorkspaceError,
    WorkspaceFileError,
    WriteTool,
    open_workspace_file,
)


@pytest.fixture
def var(tmp_path: Path) -> Path:
    folder = tmp_path / "var"
    folder.mkdir(mode=0o700)
    folder.chmod(0o700)
    (folder / "secret_key").write_text("SECRET-CANARY\n")
    return folder


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "workspaces" / "7")


def plant(ws: Workspace, name: str, target: Path) -> None:
    """What `rm -rf out && ln -s /srv/var out` does inside the workspace."""
    (ws.root / name).rmdir()
    (ws.root / name).symlink_to(target)


def test_the_download_function_refuses_a_planted_out_link(ws: Workspace, var: Path) -> None:
    plant(ws, "out", var)
    with pytest.raises(WorkspaceFileError) as refused:
        open_workspace_file(ws, "out/secret_key")
    assert refused.value.reason == "link"
    assert "symbolic link" in str(refused.value)


def test_the_download_function_refuses_a_link_as_the_last_component(ws: Workspace, var) -> None:
    (ws.out_dir / "report.md").symlink_to(var / "secret_key")
    with pytest.raises(WorkspaceFileError) as refused:
        open_workspace_file(ws, "out/report.md")
    assert refused.value.reason == "link"


def test_the_download_function_serves_a_real_file_and_refuses_bad_paths(ws: Workspace) -> None:
    (ws.out_dir / "sub").mkdir()
    (ws.out_dir / "sub" / "r.md").write_text("report\n")
    with open_workspace_file(ws, "out/sub/r.md") as handle:
        assert handle.read() == b"report\n"
    for bad, reason in [
        ("../var/secret_key", "invalid"),
        ("/etc/passwd", "invalid"),
        ("out//r.md", "invalid"),
        ("out/none.md", "missing"),
        ("out/sub", "not-a-file"),
    ]:
        with pytest.raises(WorkspaceFileError) as refused:
            open_workspace_file(ws, bad)
        assert refused.value.reason == reason, bad


def test_artifacts_never_list_files_behind_a_planted_out_link(ws: Workspace, var: Path) -> None:
    plant(ws, "out", var)
    assert ws.artifacts() == []
    assert ws.snapshot_out() == {}


def test_workspace_set_up_removes_the_link_and_never_chmods_its_target(
    ws: Workspace, var: Path
) -> None:
    plant(ws, "out", var)
    plant(ws, "work", var)
    again = Workspace(ws.root)
    assert stat.S_IMODE(var.stat().st_mode) == 0o700  # untouched
    assert not again.out_dir.is_symlink() and again.out_dir.is_dir()
    assert not again.work_dir.is_symlink() and again.work_dir.is_dir()
    assert (var / "secret_key").exists()  # only the link went


def test_a_file_put_where_a_folder_belongs_is_moved_aside_not_lost(ws: Workspace) -> None:
    (ws.root / "out").rmdir()
    (ws.root / "out").write_text("keep me")
    Workspace(ws.root)
    aside = [p for p in ws.root.iterdir() if p.name.startswith("out.not-a-folder-")]
    assert len(aside) == 1 and aside[0].read_text() == "keep me"


def test_staging_never_writes_through_a_planted_marker_link(
    ws: Workspace, var: Path, tmp_path: Path
) -> None:
    source = tmp_path / "skill"
    source.mkdir()
    (source / "SKILL.md").write_text("---\ndescription: d\n---\nbody\n")
    (ws.skills_dir / ".demo.digest").symlink_to(var / "secret_key")
    ws.stage_skill("demo", source, "digest-1")
    assert (var / "secret_key").read_text() == "SECRET-CANARY\n"
    assert not (ws.skills_dir / ".demo.digest").is_symlink()


async def test_file_tools_do_not_write_or_read_through_a_planted_work_link(
    ws: Workspace, var: Path
) -> None:
    ctx = ToolContext(workspace=ws)
    plant(ws, "work", var)
    with pytest.raises(WorkspaceError, match="symbolic link"):
        await WriteTool().run({"file_path": "work/evil", "content": "x"}, ctx)
    with pytest.raises(WorkspaceError, match="symbolic link"):
        await ReadTool().run({"file_path": "work/secret_key"}, ctx)
    assert not (var / "evil").exists()


def test_open_file_refuses_a_link_that_appears_after_the_check(ws: Workspace, var: Path) -> None:
    (ws.work_dir / "notes.md").write_text("mine")
    checked = ws.resolve("work/notes.md")
    plant_target = ws.work_dir / "notes.md"
    plant_target.unlink()
    plant_target.symlink_to(var / "secret_key")  # swapped between check and use
    with pytest.raises(Exception, match="symbolic link"):
        os.close(ws.open_file(checked, os.O_RDONLY))
