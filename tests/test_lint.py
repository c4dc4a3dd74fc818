from __future__ import annotations

from pathlib import Path

import pytest

from skills_app.core.skillfile import lint_skill_dir

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures" / "skills"


def skill(tmp_path: Path, folder: str, frontmatter: str, body: str = "Do the thing.\n") -> Path:
    path = tmp_path / folder
    path.mkdir(parents=True, exist_ok=True)
    if not any(line.startswith("name:") for line in frontmatter.splitlines()):
        # The spec requires a name (its absence is a warning of its own, tested below).
        frontmatter = f"{frontmatter}\nname: {folder.rsplit('/', 1)[-1]}"
    (path / "SKILL.md").write_text(f"---\n{frontmatter}\n---\n{body}", encoding="utf-8")
    return path


def rules(problems, severity=None):
    return {p.rule for p in problems if severity is None or p.severity == severity}


@pytest.mark.parametrize("name", ["pdf-tools", "a", "x9", "技能", "мой-навык", "навык", "a" * 64])
def test_it_accepts_valid_names(tmp_path, name):
    assert lint_skill_dir(skill(tmp_path, name, f"name: {name}\ndescription: d")) == []


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("PDF", "uppercase"),
        ("НАВЫК", "uppercase"),
        ("-lead", "hyphen"),
        ("trail-", "hyphen"),
        ("a--b", "'--'"),
        ("under_score", "'_'"),
        ("a" * 65, "65 characters"),
        ("has space", "' '"),
    ],
)
def test_it_rejects_invalid_names_as_errors(tmp_path, name, why):
    problems = lint_skill_dir(skill(tmp_path, name, f"name: '{name}'\ndescription: d"))
    errors = [p for p in problems if p.rule == "name-format"]
    assert errors
    assert all(p.severity == "error" for p in errors)
    assert why in errors[0].message


def test_it_rejects_an_empty_frontmatter_name(tmp_path):
    problems = lint_skill_dir(skill(tmp_path, "ok-dir", "name: ''\ndescription: d"))
    assert "name-format" in rules(problems, "error")


def test_it_warns_when_the_name_differs_from_the_folder(tmp_path):
    problems = lint_skill_dir(skill(tmp_path, "folder-name", "name: other-name\ndescription: d"))
    assert [(p.rule, p.severity, p.line) for p in problems] == [
        ("name-matches-directory", "warning", 2)
    ]


def test_it_compares_names_after_nfkc_normalisation(tmp_path):
    decomposed = "cafe\u0301"
    assert lint_skill_dir(skill(tmp_path, "café", f"name: {decomposed}\ndescription: d")) == []


def test_it_warns_on_descriptions_over_1024_characters(tmp_path):
    assert lint_skill_dir(skill(tmp_path, "ok", "description: " + "x" * 1024)) == []
    problems = lint_skill_dir(skill(tmp_path, "long", "description: " + "x" * 1025))
    # A spec overshoot the official skills make: a warning, not a refusal.
    assert rules(problems, "error") == set()
    assert rules(problems, "warning") == {"description-length"}


def test_it_warns_on_a_missing_description_with_a_body_and_errors_without_one(tmp_path):
    assert rules(lint_skill_dir(skill(tmp_path, "fallback", "name: fallback"))) == {
        "description-missing"
    }
    assert rules(lint_skill_dir(skill(tmp_path, "fallback", "name: fallback")), "warning") == {
        "description-missing"
    }
    problems = lint_skill_dir(skill(tmp_path, "nothing", "description: ''", body=""))
    assert rules(problems, "error") == {"description-missing"}


def test_it_rejects_a_description_that_is_not_a_string(tmp_path):
    problems = lint_skill_dir(skill(tmp_path, "listy", "description: [a, b]"))
    assert rules(problems, "error") == {"description-type"}


def test_it_limits_compatibility_to_500_characters(tmp_path):
    assert (
        lint_skill_dir(skill(tmp_path, "ok", "description: d\ncompatibility: " + "c" * 500)) == []
    )
    problems = lint_skill_dir(
        skill(tmp_path, "long", "description: d\ncompatibility: " + "c" * 501)
    )
    assert rules(problems, "error") == {"compatibility-length"}


def test_it_warns_on_unknown_keys(tmp_path):
    problems = lint_skill_dir(skill(tmp_path, "keys", "description: d\ncolour: red"))
    assert [(p.rule, p.severity) for p in problems] == [("unknown-key", "warning")]


def test_it_rejects_a_boolean_it_cannot_read(tmp_path):
    problems = lint_skill_dir(
        skill(tmp_path, "flag", "description: d\ndisable-model-invocation: maybe")
    )
    assert [(p.rule, p.severity, p.line) for p in problems] == [("bool-value", "error", 3)]


def test_it_rejects_fields_of_the_wrong_type(tmp_path):
    problems = lint_skill_dir(
        skill(tmp_path, "types", "description: d\nallowed-tools: {a: 1}\nmodel: [x]")
    )
    assert [(p.rule, p.severity) for p in problems] == [
        ("field-type", "error"),
        ("field-type", "error"),
    ]
    problems = lint_skill_dir(skill(tmp_path, "meta", "description: d\nmetadata: just text"))
    assert [(p.rule, p.severity) for p in problems] == [("field-type", "warning")]


def test_it_warns_on_effort_and_context_values_it_ignores(tmp_path):
    problems = lint_skill_dir(
        skill(tmp_path, "vals", "description: d\neffort: extreme\ncontext: inline")
    )
    assert rules(problems, "warning") == {"effort-value", "context-value"}


def test_it_warns_on_a_body_over_500_lines(tmp_path):
    assert (
        lint_skill_dir(skill(tmp_path, "short", "description: d", body="line\n" * 499 + "end"))
        == []
    )
    problems = lint_skill_dir(skill(tmp_path, "long", "description: d", body="line\n" * 501))
    assert [(p.rule, p.severity) for p in problems] == [("body-size", "warning")]


def test_it_warns_on_a_body_over_about_5000_tokens(tmp_path):
    problems = lint_skill_dir(skill(tmp_path, "wide", "description: d", body="word " * 4100))
    assert rules(problems) == {"body-size"}


def test_it_warns_on_absolute_paths_in_the_body(tmp_path):
    body = "Intro.\n\nOpen /home/alice/notes/todo.md then C:\\Users\\bob\\file.txt.\n"
    problems = lint_skill_dir(skill(tmp_path, "abs", "description: d", body=body))
    found = [p for p in problems if p.rule == "absolute-path"]
    assert [p.severity for p in found] == ["warning", "warning"]
    # The reason, not the body's text.
    assert "home folder" in found[0].message and "/home/alice" not in found[0].message
    assert found[0].line == 7  # the helper adds `name:` at the end of the frontmatter


def test_it_does_not_mistake_url_routes_for_absolute_paths(tmp_path):
    body = (
        "Call `POST /v1/messages` or GET /v1/models/{id}; admin routes live under /api/org/users.\n"
        "```js\nfetch('/reports/daily/summary'); app.get('/orders/list/:id', h);\n```\n"
        'Links: [docs](/docs/guide/intro), <a href="/static/css/app.css">css</a>.\n'
        "Outputs go to <workspace>/iteration-1/out.json, logs to /dev/null and /tmp/run/log.txt;\n"
        "replace /path/to/file.pdf with yours.\n"
    )
    problems = lint_skill_dir(skill(tmp_path, "routes", "description: d", body=body))
    assert [p for p in problems if p.rule == "absolute-path"] == []


def test_it_does_not_mistake_urls_skill_dir_paths_or_slash_commands_for_absolute_paths(tmp_path):
    (tmp_path / "rel" / "scripts").mkdir(parents=True)
    (tmp_path / "rel" / "scripts" / "run.py").write_text("")
    body = (
        "See https://example.com/docs/page and run ${CLAUDE_SKILL_DIR}/scripts/run.py.\n"
        "Type /rel to start; and/or read input/output docs; dates like 12/05/2024.\n"
    )
    assert lint_skill_dir(skill(tmp_path, "rel", "description: d", body=body)) == []


def test_it_warns_on_references_to_files_that_are_not_in_the_folder(tmp_path):
    body = (
        "Read [the guide](references/guide.md), `scripts/missing.py` and "
        "${CLAUDE_SKILL_DIR}/assets/logo.png.\n"
    )
    problems = lint_skill_dir(skill(tmp_path, "refs", "description: d", body=body))
    found = [p for p in problems if p.rule == "missing-reference"]
    assert len(found) == 3 and {p.line for p in found} == {5}  # after the helper's `name:`
    assert not any(name in p.message for p in found for name in ("guide", "missing", "logo"))
    assert {p.severity for p in problems} == {"warning"}


def test_it_accepts_references_to_files_that_exist(tmp_path):
    folder = skill(
        tmp_path,
        "refs",
        "description: d",
        body=(
            "Read [the guide](references/guide.md#setup), `scripts/run.py`, "
            "${CLAUDE_SKILL_DIR}/assets/logo.png, [site](https://example.com/x) and [top](#top).\n"
            "Globs like `references/*.md` are not file names.\n"
        ),
    )
    for rel in ("references/guide.md", "scripts/run.py", "assets/logo.png"):
        (folder / rel).parent.mkdir(exist_ok=True)
        (folder / rel).write_text("x")
    assert lint_skill_dir(folder) == []


def test_it_returns_problems_instead_of_raising(tmp_path):
    assert rules(lint_skill_dir(tmp_path / "absent")) == {"missing-skill-file"}
    broken = skill(tmp_path, "broken", "description: [unclosed")
    problems = lint_skill_dir(broken)
    assert [(p.rule, p.severity) for p in problems] == [("yaml", "error")]
    assert problems[0].line in (2, 3)  # where the sequence opens, or the fence where YAML noticed


def test_the_bundled_skills_lint_clean():
    folders = sorted(p for p in (ROOT / "skills").iterdir() if p.is_dir())
    assert [p.name for p in folders] == [
        "change-scout",
        "commit-message",
        "release-notes",
        "release-prep",
        "style-guide",
        "table-kit",
        "text-stats",
    ]
    for folder in folders:
        assert lint_skill_dir(folder) == [], folder


def test_the_fixture_skills_have_no_errors():
    for skill_file in FIXTURES.rglob("*"):
        if skill_file.name.lower() == "skill.md":
            assert [p for p in lint_skill_dir(skill_file.parent) if p.severity == "error"] == []


def test_it_says_why_a_skill_without_description_or_when_to_use_is_not_listed(tmp_path):
    (problem,) = lint_skill_dir(skill(tmp_path, "quiet", "name: quiet"))
    assert problem.rule == "description-missing" and problem.severity == "warning"
    assert "left out of the model's catalog" in problem.message
    (listed,) = lint_skill_dir(skill(tmp_path, "timed", "name: timed\nwhen_to_use: On Fridays."))
    assert "left out" not in listed.message
