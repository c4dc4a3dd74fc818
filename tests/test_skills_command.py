from __future__ import annotations

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from skills_app.core.catalog import CATALOG_INTRO
from skills_app.registry.skills import get_registry

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures" / "skills"


def run(*args: str) -> str:
    out = StringIO()
    call_command("skills", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def manage(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings"}
    return subprocess.run(
        [sys.executable, "manage.py", "skills", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def make(root: Path, name: str, text: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(text, encoding="utf-8")
    return folder


def test_list_json_describes_every_skill_exactly_as_parsed():
    rows = json.loads(run("list", "--dir", str(FIXTURES), "--json"))
    by_name = {r["name"]: r for r in rows}
    assert by_name["brand-voice"]["description"] == (
        "Rewrites marketing copy in the brand's voice.\nKeeps claims factual and sentences short."
    )
    deploy = by_name["acme-tools:deploy"]
    assert (deploy["model_invocable"], deploy["user_invocable"]) == (False, True)
    assert by_name["acme-tools:rollback"]["user_invocable"] is False
    assert [w["rule"] for w in by_name["plain-notes"]["warnings"]] == [
        "frontmatter-missing",
        "name-missing",
        "description-missing",
    ]
    for row in rows:
        assert {"name", "description", "source", "path", "digest", "errors", "warnings"} <= set(row)
        assert row["source"] == "dirs"
        assert len(row["digest"]) == 64
        assert Path(row["path"]).is_absolute()


def test_list_json_includes_broken_and_shadowed_skills(tmp_path):
    make(tmp_path / "a", "shared", "---\ndescription: winner\n---\n")
    make(tmp_path / "b", "shared", "---\ndescription: loser\n---\n")
    make(tmp_path / "b", "broken", "---\ndescription: [oops\n---\n")
    rows = json.loads(
        run("list", "--dir", str(tmp_path / "a"), "--dir", str(tmp_path / "b"), "--json")
    )
    shared = [r for r in rows if r["name"] == "shared"]
    assert [(r["description"], r["shadowed"]) for r in shared] == [
        ("winner", False),
        ("loser", True),
    ]
    assert shared[1]["shadowed_by"] == str(tmp_path / "a" / "shared")
    [broken] = [r for r in rows if r["name"] == "broken"]
    assert broken["loaded"] is False
    assert broken["errors"][0]["rule"] == "yaml"
    assert broken["errors"][0]["line"] is not None


def test_list_prints_a_readable_table():
    out = run("list", "--dir", str(FIXTURES))
    assert "csv-cleaner  [dirs, model, user]" in out
    assert "warning [description-missing]" in out


def test_validate_passes_the_bundled_skills_with_exit_code_0():
    result = manage("validate", str(ROOT / "skills"))
    assert result.returncode == 0, result.stderr
    assert "7 skill(s) checked: 0 error(s), 0 warning(s)" in result.stdout


def test_validate_fails_a_skill_with_errors_with_exit_code_1(tmp_path):
    folder = make(tmp_path, "Bad_Name", "---\ndescription: " + "x" * 1100 + "\n---\nBody\n")
    result = manage("validate", str(folder))
    assert result.returncode == 1
    assert "[name-format]" in result.stdout
    assert "warning [description-length]" in result.stdout
    assert "1 error(s)" in result.stderr


def test_validate_reports_yaml_errors_in_a_folder_of_skills(tmp_path):
    make(tmp_path, "fine", "---\ndescription: ok\n---\n")
    make(tmp_path, "broken", "---\ndescription: [oops\n---\n")
    with pytest.raises(CommandError, match="1 error"):
        run("validate", str(tmp_path))


def test_validate_refuses_a_folder_without_skills(tmp_path):
    with pytest.raises(CommandError, match="no SKILL.md"):
        run("validate", str(tmp_path))


def test_catalog_prints_the_exact_catalog_within_the_budget():
    out = run("catalog", "--dir", str(FIXTURES), "--budget", "1200")
    assert out.startswith(CATALOG_INTRO)
    assert '"csv-cleaner": Cleans CSV files' in out
    assert '"acme-tools:deploy"' not in out  # user-only skills are not offered to the model
    assert len(out.rstrip("\n")) <= 1200


def test_render_prints_the_hidden_message_with_arguments():
    out = run("render", "csv-cleaner", "data/in.csv", "--dir", str(FIXTURES))
    assert out == (
        f"Base directory for this skill: {FIXTURES.absolute() / 'csv-cleaner'}\n\n"
        "Clean `data/in.csv` and report what changed.\n"
    )


@pytest.mark.django_db  # the configured registry includes uploaded skills (database)
def test_render_of_the_bundled_text_stats_skill_names_its_script():
    out = run("render", "text-stats", "notes.txt")
    assert f"python3 {ROOT / 'skills' / 'text-stats'}/scripts/stats.py notes.txt" in out


def test_render_of_an_unknown_skill_fails():
    with pytest.raises(CommandError, match="no skill named 'nope'"):
        run("render", "nope", "--dir", str(FIXTURES))


@pytest.mark.django_db  # the configured registry includes uploaded skills (database)
def test_the_configured_registry_puts_skills_dirs_before_bundled(tmp_path):
    make(tmp_path / "bundled", "same", "---\ndescription: bundled one\n---\n")
    make(tmp_path / "extra", "same", "---\ndescription: admin one\n---\n")
    with override_settings(
        BUNDLED_SKILLS_DIR=tmp_path / "bundled", SKILLS_DIRS=[tmp_path / "extra"]
    ):
        registry = get_registry()
        assert registry.get("same").description == "admin one"
        assert [s.loser_source for s in registry.shadowed] == ["bundled"]
        assert get_registry() is registry
    with override_settings(BUNDLED_SKILLS_DIR=tmp_path / "bundled", SKILLS_DIRS=[]):
        assert get_registry() is not registry
        assert get_registry().get("same").description == "bundled one"


def test_the_text_stats_script_writes_a_json_report(tmp_path):
    sample = tmp_path / "sample.txt"
    sample.write_text("one two\nthree\n")
    env = {**os.environ, "OUTPUT_DIR": str(tmp_path / "out")}
    script = ROOT / "skills" / "text-stats" / "scripts" / "stats.py"
    result = subprocess.run(
        [sys.executable, str(script), str(sample), "extra words"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("3 lines, 5 words, 25 characters")
    [report] = (tmp_path / "out").glob("text-stats-*.json")
    data = json.loads(report.read_text())
    assert data["total"] == {"lines": 3, "words": 5, "characters": 25}
    assert data["items"][0] == {"source": str(sample), "lines": 2, "words": 3, "characters": 14}
