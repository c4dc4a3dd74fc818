from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from skills_app.core.tools import Workspace, WorkspaceError, skill_folder_name


@pytest.fixture
def skill_src(tmp_path: Path) -> Path:
    src = tmp_path / "src" / "pdf"
    (src / "scripts").mkdir(parents=True)
    (src / "SKILL.md").write_text("---\nname: pdf\ndescription: d\n---\nbody\n")
    script = src / "scripts" / "run.sh"
    script.write_text("echo run\n")
    script.chmod(0o755)
    return src


def test_it_creates_work_out_and_skills_folders(ws: Workspace) -> None:
    for directory in (ws.work_dir, ws.out_dir, ws.skills_dir):
        assert directory.is_dir()
        assert stat.S_IMODE(directory.stat().st_mode) == 0o755
    assert ws.work_dir == ws.root / "work"


def test_it_places_a_conversation_under_its_id(tmp_path: Path) -> None:
    ws = Workspace.for_conversation(tmp_path, 42)
    assert ws.root == (tmp_path / "42").resolve()


def test_it_refuses_a_conversation_id_that_could_escape(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="Invalid conversation id"):
        Workspace.for_conversation(tmp_path, "../x")


def test_it_resolves_relative_paths_against_the_root(ws: Workspace) -> None:
    assert ws.resolve("out/report.md") == ws.out_dir / "report.md"
    assert ws.resolve("work/../out/a") == ws.out_dir / "a"
    assert ws.resolve(str(ws.root / "work" / "x")) == ws.work_dir / "x"


def test_it_refuses_dot_dot_escapes(ws: Workspace) -> None:
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        ws.resolve("../../etc/passwd")
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        ws.resolve("work/../../sibling")


def test_it_refuses_absolute_paths_outside(ws: Workspace) -> None:
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        ws.resolve("/etc/passwd")


def test_it_refuses_a_symlink_that_leads_outside(ws: Workspace, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cret")
    (ws.work_dir / "link").symlink_to(secret)
    (ws.work_dir / "dirlink").symlink_to(tmp_path)
    for path in ("work/link", "work/dirlink/secret.txt"):
        with pytest.raises(WorkspaceError, match="symbolic link"):
            ws.resolve(path)


def test_it_allows_a_symlink_that_stays_inside(ws: Workspace) -> None:
    (ws.out_dir / "a.txt").write_text("a")
    (ws.work_dir / "link").symlink_to(ws.out_dir / "a.txt")
    assert ws.resolve("work/link") == ws.out_dir / "a.txt"


def test_it_refuses_writes_under_skills_even_through_a_symlink(ws: Workspace) -> None:
    (ws.skills_dir / "pdf").mkdir()
    (ws.work_dir / "sneaky").symlink_to(ws.skills_dir / "pdf")
    assert ws.resolve("skills/pdf/SKILL.md") == ws.skills_dir / "pdf" / "SKILL.md"
    for path in ("skills/pdf/SKILL.md", "skills", "work/sneaky/x"):
        with pytest.raises(WorkspaceError, match="read-only"):
            ws.resolve(path, for_write=True)


def test_it_refuses_empty_and_nul_paths(ws: Workspace) -> None:
    with pytest.raises(WorkspaceError, match="path is required"):
        ws.resolve("  ")
    with pytest.raises(WorkspaceError, match="NUL"):
        ws.resolve("a\x00b")


def test_it_turns_plugin_names_into_safe_folder_names() -> None:
    assert skill_folder_name("pdf") == "pdf"
    assert skill_folder_name("acme:pdf") == "acme__pdf"
    assert skill_folder_name("a/b c") == "a_b_c"
    with pytest.raises(WorkspaceError):
        skill_folder_name("..")


def test_it_stages_a_skill_read_only(ws: Workspace, skill_src: Path) -> None:
    staged = ws.stage_skill("acme:pdf", skill_src, "d1")
    assert staged == ws.skills_dir / "acme__pdf"
    assert (staged / "SKILL.md").read_text().endswith("body\n")
    assert stat.S_IMODE((staged / "SKILL.md").stat().st_mode) == 0o444
    assert stat.S_IMODE((staged / "scripts" / "run.sh").stat().st_mode) == 0o555
    assert stat.S_IMODE((staged / "scripts").stat().st_mode) == 0o555
    assert stat.S_IMODE(staged.stat().st_mode) == 0o555


def test_it_copies_again_only_when_the_digest_changes(ws: Workspace, skill_src: Path) -> None:
    staged = ws.stage_skill("pdf", skill_src, "d1")
    (skill_src / "SKILL.md").write_text("new body\n")
    assert ws.stage_skill("pdf", skill_src, "d1") == staged
    assert (staged / "SKILL.md").read_text().endswith("body\n")
    assert "new" not in (staged / "SKILL.md").read_text()
    ws.stage_skill("pdf", skill_src, "d2")
    assert (staged / "SKILL.md").read_text() == "new body\n"
    assert not [p for p in ws.skills_dir.iterdir() if p.name.startswith(".staging")]


def test_it_copies_again_when_the_staged_copy_was_tampered_with(
    ws: Workspace, skill_src: Path
) -> None:
    staged = ws.stage_skill("pdf", skill_src, "d1")
    target = staged / "SKILL.md"
    target.chmod(0o644)
    target.write_text("evil\n")
    ws.stage_skill("pdf", skill_src, "d1")
    assert target.read_text().endswith("body\n")


def test_it_never_follows_symlinks_out_of_the_skill_folder(
    ws: Workspace, skill_src: Path, tmp_path: Path
) -> None:
    (tmp_path / "secret.txt").write_text("s3cret")
    (skill_src / "leak.txt").symlink_to(tmp_path / "secret.txt")
    (skill_src / "leakdir").symlink_to(tmp_path)
    (skill_src / "alias.md").symlink_to(skill_src / "SKILL.md")
    staged = ws.stage_skill("pdf", skill_src, "d1")
    assert not (staged / "leak.txt").exists()
    assert not (staged / "leakdir").exists()
    assert not (staged / "alias.md").is_symlink()
    assert (staged / "alias.md").read_text() == (skill_src / "SKILL.md").read_text()


def test_it_refuses_to_stage_a_missing_folder(ws: Workspace, tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="not a directory"):
        ws.stage_skill("pdf", tmp_path / "nope", "d1")


def test_it_lists_artifacts_under_out_without_symlinks(ws: Workspace, tmp_path: Path) -> None:
    (ws.out_dir / "b.md").write_text("b")
    (ws.out_dir / "sub").mkdir()
    (ws.out_dir / "sub" / "a.csv").write_text("a")
    (ws.out_dir / "passwd").symlink_to("/etc/passwd")
    (ws.work_dir / "scratch").write_text("x")
    assert ws.artifacts() == ["out/b.md", "out/sub/a.csv"]
    snap = ws.snapshot_out()
    assert snap["out/b.md"][1] == 1
    os.utime(ws.out_dir / "b.md", ns=(1, 1))
    assert ws.snapshot_out()["out/b.md"] != snap["out/b.md"]


def test_a_staged_skill_links_out_and_work_to_the_workspace(ws: Workspace, skill_src: Path) -> None:
    staged = ws.stage_skill("pdf", skill_src, "d1")
    assert os.readlink(staged / "out") == "../../out"
    assert os.readlink(staged / "work") == "../../work"
    assert (staged / "out").resolve() == ws.out_dir
    # Through the link a path resolves into out/, which is writable; the copy itself is not.
    assert ws.resolve("skills/pdf/out/r.md", for_write=True) == ws.out_dir / "r.md"
    with pytest.raises(WorkspaceError, match="read-only"):
        ws.resolve("skills/pdf/SKILL.md", for_write=True)


def test_a_skill_with_its_own_work_folder_keeps_it(ws: Workspace, skill_src: Path) -> None:
    (skill_src / "work").mkdir()
    (skill_src / "work" / "seed.txt").write_text("mine\n")
    staged = ws.stage_skill("pdf", skill_src, "d1")
    assert not (staged / "work").is_symlink()
    assert (staged / "work" / "seed.txt").read_text() == "mine\n"
    assert (staged / "out").is_symlink()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give files away")
def test_as_root_the_staged_copy_and_skills_belong_to_another_user(
    ws: Workspace, skill_src: Path
) -> None:
    staged = ws.stage_skill("pdf", skill_src, "d1")
    owners = {p.lstat().st_uid for p in [ws.skills_dir, staged, *staged.rglob("*")]}
    assert owners == {65534}


def test_it_copies_again_when_a_link_of_the_staged_copy_was_changed(
    ws: Workspace, skill_src: Path, tmp_path: Path
) -> None:
    staged = ws.stage_skill("pdf", skill_src, "d1")
    os.chmod(staged, 0o755)
    (staged / "out").unlink()
    (staged / "out").symlink_to(tmp_path)
    ws.stage_skill("pdf", skill_src, "d1")
    assert os.readlink(staged / "out") == "../../out"


def test_each_run_folder_is_new_and_a_planted_runs_link_is_replaced(
    ws: Workspace, tmp_path: Path
) -> None:
    first, second = ws.new_run_dir(), ws.new_run_dir()
    assert first != second and first.parent == second.parent == ws.root / "runs"
    assert list(first.iterdir()) == []
    outside = tmp_path / "outside"
    outside.mkdir()
    for entry in (ws.root / "runs").iterdir():
        entry.rmdir()
    (ws.root / "runs").rmdir()
    (ws.root / "runs").symlink_to(outside)
    third = ws.new_run_dir()
    assert not (ws.root / "runs").is_symlink() and third.is_dir()
    assert list(outside.iterdir()) == []
