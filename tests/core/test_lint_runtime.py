"""Run-time lint (core.lint_runtime): what breaks when the skill runs, each problem once, files
named, never the body's prose quoted."""

from __future__ import annotations

from pathlib import Path

from skills_app.core.lint_runtime import lint_runtime_dir, merge
from skills_app.core.skillfile import parse_skill_dir

BODY_PROSE = "Summarise the quarterly figures for the board in three plain sentences"


def _lint(tmp_path: Path, text: str, files: dict[str, str] | None = None):
    folder = tmp_path / "report"
    folder.mkdir()
    (folder / "SKILL.md").write_text(text)
    for rel, data in (files or {}).items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(data)
    spec = parse_skill_dir(folder)
    return spec, lint_runtime_dir(folder, spec)


def test_a_script_run_by_a_workspace_relative_path_is_flagged_once_with_the_fix(tmp_path):
    text = (
        "---\nname: report\ndescription: Makes a report.\n---\n"
        f"{BODY_PROSE}.\n\nRun `python3 scripts/make_report.py --fast`.\n\n"
        "```bash\npython3 scripts/make_report.py\n```\n"
    )
    _spec, problems = _lint(tmp_path, text, {"scripts/make_report.py": "print(1)\n"})
    found = [p for p in problems if p.rule == "script-path"]
    assert len(found) == 1 and found[0].line == 7
    assert "`${CLAUDE_SKILL_DIR}/scripts/make_report.py`" in found[0].message
    assert "`{baseDir}/scripts/make_report.py`" in found[0].message
    assert BODY_PROSE not in found[0].message


def test_missing_files_are_named_once_each(tmp_path):
    text = (
        "---\nname: report\ndescription: Makes a report.\n---\n"
        "See [the guide](references/guide.md) and [again](references/guide.md).\n"
        "Run `python3 ${CLAUDE_SKILL_DIR}/scripts/gone.py now`.\n"
        "Read `assets/logo.png`.\n"
    )
    spec, problems = _lint(tmp_path, text, {"assets/logo.png": "x"})
    missing = sorted(p.message for p in problems if p.rule == "missing-file")
    assert len(missing) == 2
    assert "`references/guide.md`" in missing[0] and "`scripts/gone.py`" in missing[1]
    # One report per file: the spec lint's unnamed warning for the same line gives way.
    merged = merge(spec.problems, problems)
    assert [p.rule for p in merged if p.line == 5] == ["missing-file"]


def test_allowed_tools_that_grant_too_much_are_flagged_each_once(tmp_path):
    text = (
        "---\nname: report\ndescription: Makes a report.\n"
        "allowed-tools: Bash(rm -rf *) Bash Bash(curl *) Bash(git diff *) Bash(rm -rf *)\n---\nBody.\n"
    )
    _spec, problems = _lint(tmp_path, text)
    broad = [p.message for p in problems if p.rule == "broad-allowed-tools"]
    assert len(broad) == 3
    assert any("Bash(rm -rf *)" in m and "deletes any file" in m for m in broad)
    assert any("`allowed-tools: Bash`" in m and "every command" in m for m in broad)
    assert any("Bash(curl *)" in m and "network" in m for m in broad)


def test_a_clean_skill_has_no_run_time_problems(tmp_path):
    text = (
        "---\nname: report\ndescription: Makes a report.\n"
        "allowed-tools: Bash(python3 ${CLAUDE_SKILL_DIR}/scripts/make_report.py *)\n---\n"
        "Run `python3 ${CLAUDE_SKILL_DIR}/scripts/make_report.py --fast`.\n"
    )
    assert _lint(tmp_path, text, {"scripts/make_report.py": "print(1)\n"})[1] == []
