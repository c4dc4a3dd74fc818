from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from skills_app.core import skillfile
from skills_app.core.registry import SkillRegistry, SkillSource, discover
from skills_app.core.skillfile import parse_skill_dir
from tests.support.paths import SKILL_FIXTURES

FIXTURES = SKILL_FIXTURES


def make(root: Path, rel: str, description: str = "d", extra: str = "") -> Path:
    folder = root / rel
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(
        f"---\ndescription: {description}\n{extra}---\nBody of {rel}.\n"
    )
    return folder


def bump(path: Path, text: str) -> None:
    """Rewrite a file and move its mtime forward, so the change is seen even on coarse clocks."""
    before = path.stat().st_mtime_ns
    path.write_text(text)
    os.utime(path, ns=(before + 2_000_000_000, before + 2_000_000_000))


def test_it_discovers_flat_plugin_and_unicode_layouts():
    registry = SkillRegistry([SkillSource("dirs", FIXTURES)])
    names = [s.name for s in registry.skills()]
    assert names == sorted(names)
    assert set(names) == {
        "acme-tools:deploy",
        "acme-tools:rollback",
        "brand-voice",
        "csv-cleaner",
        "meeting-notes",
        "pdf-forms",
        "plain-notes",
        "мой-навык",
        "技能",
    }
    deploy = registry.get("acme-tools:deploy")
    assert deploy.path == FIXTURES.absolute() / "acme-tools" / "skills" / "deploy"
    assert deploy.source == "dirs"
    assert deploy.disable_model_invocation
    assert registry.errors == [] and registry.shadowed == []


def test_it_accepts_a_root_that_is_itself_a_skill(tmp_path):
    folder = make(tmp_path, "solo")
    registry = SkillRegistry([SkillSource("dirs", folder)])
    assert [s.name for s in registry.skills()] == ["solo"]


def test_it_skips_hidden_git_and_node_modules_folders(tmp_path):
    make(tmp_path, "visible")
    make(tmp_path, ".hidden")
    make(tmp_path, ".git/inside")
    make(tmp_path, "node_modules/pkg")
    assert [s.name for s in SkillRegistry([SkillSource("dirs", tmp_path)]).skills()] == ["visible"]


def test_it_bounds_the_search_depth(tmp_path):
    make(tmp_path, "a/b/c/shallow")
    make(tmp_path, "a/b/c/d/too-deep")
    names = [s.name for s in SkillRegistry([SkillSource("dirs", tmp_path)]).skills()]
    assert names == ["shallow"]


def test_it_follows_symlinks_once_without_looping(tmp_path):
    real = make(tmp_path / "store", "linked")
    root = tmp_path / "root"
    root.mkdir()
    (root / "linked").symlink_to(real)
    (root / "again").symlink_to(real)
    (root / "loop").symlink_to(root)
    registry = SkillRegistry([SkillSource("dirs", root)])
    skills = registry.skills()
    assert len(skills) == 1
    assert skills[0].name in {"again", "linked"}


def test_earlier_sources_win_and_the_loser_is_reported(tmp_path):
    first = make(tmp_path / "first", "shared", "from first")
    second = make(tmp_path / "second", "shared", "from second")
    make(tmp_path / "second", "only-second")
    registry = SkillRegistry(
        [SkillSource("dirs", tmp_path / "first"), SkillSource("bundled", tmp_path / "second")]
    )
    assert registry.get("shared").description == "from first"
    assert registry.get("only-second").source == "bundled"
    [clash] = registry.shadowed
    assert (clash.name, clash.winner, clash.loser) == ("shared", first, second)
    assert (clash.winner_source, clash.loser_source) == ("dirs", "bundled")
    assert [s.description for s in registry.candidates() if s.name == "shared"] == [
        "from first",
        "from second",
    ]


def test_extra_skills_outrank_every_folder(tmp_path):
    make(tmp_path / "dirs", "shared", "from folder")
    uploaded = parse_skill_dir(make(tmp_path / "uploads", "shared", "uploaded"), source="uploaded")
    registry = SkillRegistry([SkillSource("dirs", tmp_path / "dirs")], extra=lambda: [uploaded])
    assert registry.get("shared").description == "uploaded"
    assert registry.get("shared").source == "uploaded"
    assert [(s.winner_source, s.loser_source) for s in registry.shadowed] == [("uploaded", "dirs")]


def test_a_clash_inside_one_source_is_resolved_by_path_order(tmp_path):
    make(tmp_path, "group-a/dup", "from a")
    make(tmp_path, "group-b/dup", "from b")
    registry = SkillRegistry([SkillSource("dirs", tmp_path)])
    assert registry.get("dup").description == "from a"
    assert [s.loser for s in registry.shadowed] == [tmp_path / "group-b" / "dup"]


def test_a_skill_that_cannot_load_is_skipped_and_reported(tmp_path):
    make(tmp_path, "good")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "SKILL.md").write_text("---\ndescription: ok\nlist: [oops\n---\n")
    registry = SkillRegistry([SkillSource("dirs", tmp_path)])
    assert [s.name for s in registry.skills()] == ["good"]
    [error] = registry.errors
    assert error.rule == "yaml"
    assert error.file == str(bad / "SKILL.md")
    assert error.line is not None
    assert [(f.name, f.path) for f in registry.failures] == [("bad", bad)]


def test_it_sees_an_edited_skill_file_on_the_next_call(tmp_path):
    folder = make(tmp_path, "live", "before")
    registry = SkillRegistry([SkillSource("dirs", tmp_path)])
    assert registry.get("live").description == "before"
    bump(folder / "SKILL.md", "---\ndescription: after the edit\n---\n")
    assert registry.get("live").description == "after the edit"


def test_it_sees_added_and_removed_skill_folders(tmp_path):
    make(tmp_path, "one")
    registry = SkillRegistry([SkillSource("dirs", tmp_path)])
    assert [s.name for s in registry.skills()] == ["one"]
    make(tmp_path, "two")
    assert [s.name for s in registry.skills()] == ["one", "two"]
    shutil.rmtree(tmp_path / "one")
    assert [s.name for s in registry.skills()] == ["two"]


def test_it_sees_a_skill_file_added_to_an_existing_folder(tmp_path):
    (tmp_path / "later").mkdir()
    registry = SkillRegistry([SkillSource("dirs", tmp_path)])
    assert registry.skills() == []
    (tmp_path / "later" / "SKILL.md").write_text("---\ndescription: now\n---\n")
    assert [s.name for s in registry.skills()] == ["later"]


def test_it_updates_the_digest_when_a_reference_file_changes(tmp_path):
    folder = make(tmp_path, "dig")
    (folder / "references").mkdir()
    (folder / "references" / "a.md").write_text("one")
    registry = SkillRegistry([SkillSource("dirs", tmp_path)])
    before = registry.get("dig").digest
    bump(folder / "references" / "a.md", "two!")
    after = registry.get("dig").digest
    assert after != before
    assert after == skillfile.skill_digest(folder)


def test_a_warm_recheck_reads_no_files(tmp_path, monkeypatch):
    for i in range(5):
        make(tmp_path, f"skill-{i}")
    registry = SkillRegistry([SkillSource("dirs", tmp_path)])
    first = registry.skills()
    parses = registry.parse_count

    def no_reads(path: str) -> bytes:
        raise AssertionError(f"warm re-check read {path}")

    monkeypatch.setattr(skillfile, "_read", no_reads)
    again = registry.skills()
    assert registry.parse_count == parses == 5
    assert all(a is b for a, b in zip(first, again, strict=True))


def test_it_reports_a_source_folder_that_does_not_exist(tmp_path):
    registry = SkillRegistry([SkillSource("dirs", tmp_path / "nope")])
    assert registry.skills() == []
    assert [p.rule for p in registry.source_problems] == ["source-missing"]
    assert registry.get("anything") is None


def test_discover_names_plugin_skills_with_their_plugin():
    found = {f.name for f in discover(FIXTURES)}
    assert {"acme-tools:deploy", "acme-tools:rollback"} <= found


@pytest.mark.parametrize("kind", ["bundled", "dirs"])
def test_it_makes_source_paths_absolute(tmp_path, monkeypatch, kind):
    make(tmp_path, "rel")
    monkeypatch.chdir(tmp_path)
    [spec] = SkillRegistry([SkillSource(kind, Path("."))]).skills()
    assert spec.path == tmp_path / "rel"
    assert spec.path.is_absolute()
