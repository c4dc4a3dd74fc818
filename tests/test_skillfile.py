from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from skills_app.core.skillfile import (
    SkillFileError,
    find_skill_file,
    parse_skill_dir,
    parse_skill_text,
    skill_digest,
    split_tool_rules,
)

FIXTURES = Path(__file__).parent / "fixtures" / "skills"


def write_skill(root: Path, name: str, text: str | bytes, filename: str = "SKILL.md") -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    head, sep, rest = text.partition("\n---\n") if isinstance(text, str) else ("", "", "")
    if head.startswith("---\n") and sep and "\nname:" not in head:
        # The spec requires a name (its absence is a warning of its own, tested below).
        text = f"{head}\nname: {name}{sep}{rest}"
    data = text.encode("utf-8") if isinstance(text, str) else text
    (folder / filename).write_bytes(data)
    return folder


def frontmatter_of(path: Path) -> dict:
    text = path.read_text(encoding="utf-8")
    return yaml.safe_load(text.split("---\n", 2)[1])


@pytest.mark.parametrize("folder", ["pdf-forms", "brand-voice", "meeting-notes", "csv-cleaner"])
def test_it_keeps_descriptions_exactly_as_yaml_reads_them(folder):
    spec = parse_skill_dir(FIXTURES / folder)
    assert spec.description == frontmatter_of(FIXTURES / folder / "SKILL.md")["description"]


def test_it_reads_the_three_block_scalar_styles():
    assert parse_skill_dir(FIXTURES / "pdf-forms").description.endswith(
        "fields and the values to put in them.\n"
    )
    assert parse_skill_dir(FIXTURES / "brand-voice").description == (
        "Rewrites marketing copy in the brand's voice.\nKeeps claims factual and sentences short."
    )
    assert parse_skill_dir(FIXTURES / "meeting-notes").description == (
        "Summarises a meeting transcript into decisions, action items with owners, and open questions.\n"
    )


def test_it_reads_quoted_descriptions_that_contain_colons():
    spec = parse_skill_dir(FIXTURES / "csv-cleaner")
    assert spec.description == (
        "Cleans CSV files: trims whitespace, fixes encodings, and normalises dates: ISO 8601 only."
    )
    assert spec.problems == ()


def test_it_keeps_licence_and_metadata_maps():
    spec = parse_skill_dir(FIXTURES / "pdf-forms")
    assert spec.license == "Proprietary. LICENSE.txt has complete terms"
    assert spec.metadata == {
        "author": "Example Docs Team",
        "version": "2.1",
        "tags": ["pdf", "forms"],
    }
    assert spec.problems == ()


def test_it_reads_yaml_lists_for_tools_and_arguments():
    spec = parse_skill_dir(FIXTURES / "csv-cleaner")
    assert spec.allowed_tools == ("Read", "Bash(python3 *)")
    assert spec.arguments == ("file",)
    assert spec.argument_hint == "[file.csv]"


def test_it_splits_tool_strings_on_spaces_and_commas_outside_parentheses():
    assert split_tool_rules("Bash(git diff *), Read  Grep,Bash(ls -a, -l)") == [
        "Bash(git diff *)",
        "Read",
        "Grep",
        "Bash(ls -a, -l)",
    ]


def test_it_reads_unicode_names_and_text():
    spec = parse_skill_dir(FIXTURES / "技能")
    assert spec.name == "技能"
    assert spec.description == "用中文总结文档的要点。"
    assert spec.problems == ()
    assert parse_skill_dir(FIXTURES / "мой-навык").problems == ()


def test_it_normalises_crlf_line_endings(tmp_path):
    text = "---\r\nname: crlf\r\ndescription: |\r\n  One.\r\n  Two.\r\n---\r\n\r\nBody line.\r\nNext.\r\n"
    spec = parse_skill_dir(write_skill(tmp_path, "crlf", text))
    assert spec.description == "One.\nTwo.\n"
    assert spec.body == "Body line.\nNext.\n"
    assert "\r" not in spec.body


def test_it_strips_a_byte_order_mark(tmp_path):
    folder = write_skill(
        tmp_path, "bom", b"\xef\xbb\xbf---\nname: bom\ndescription: Has a BOM.\n---\nBody.\n"
    )
    spec = parse_skill_dir(folder)
    assert spec.description == "Has a BOM."
    assert spec.body == "Body.\n"
    assert spec.problems == ()


def test_it_accepts_a_file_without_a_trailing_newline(tmp_path):
    spec = parse_skill_dir(
        write_skill(tmp_path, "tail", "---\ndescription: No newline.\n---\nLast line")
    )
    assert spec.body == "Last line"
    spec = parse_skill_dir(
        write_skill(tmp_path, "only", "---\ndescription: Only frontmatter.\n---")
    )
    assert spec.body == ""
    assert spec.description == "Only frontmatter."


def test_it_treats_a_file_without_frontmatter_as_all_body(tmp_path):
    spec = parse_skill_dir(FIXTURES / "plain-notes")
    assert spec.frontmatter == {}
    assert spec.body.startswith("# Plain notes")
    assert spec.description == (
        "Keeps a running list of notes in notes.md in the workspace, adding each new note as a dated bullet."
    )
    assert [p.rule for p in spec.warnings] == [
        "frontmatter-missing",
        "name-missing",
        "description-missing",
    ]
    assert spec.errors == []


def test_it_finds_a_lowercase_skill_file_and_prefers_the_uppercase_one(tmp_path):
    assert find_skill_file(FIXTURES / "plain-notes") == FIXTURES / "plain-notes" / "skill.md"
    folder = write_skill(tmp_path, "both", "---\ndescription: upper\n---\n")
    (folder / "skill.md").write_text("---\ndescription: lower\n---\n")
    assert find_skill_file(folder) == folder / "SKILL.md"
    assert parse_skill_dir(folder).description == "upper"
    assert find_skill_file(tmp_path) is None


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("true", True), ("false", False), ("yes", True), ("no", False), ("on", True), ("off", False),
        ("1", True), ("0", False), ("YES", True), ("Off", False), ("oN", True), ("nO", False),
        ('"true"', True), ("'no'", False), ('"1"', True), ("'0'", False), ("TRUE", True),
    ],
)  # fmt: skip
def test_it_accepts_every_boolean_spelling(tmp_path, raw, expected):
    text = f"---\ndescription: d\ndisable-model-invocation: {raw}\nuser-invocable: {raw}\nmode: {raw}\n---\n"
    spec = parse_skill_dir(write_skill(tmp_path, "flags", text))
    assert spec.disable_model_invocation is expected
    assert spec.model_invocable is (not expected)
    assert spec.user_invocable is expected
    assert spec.mode is expected
    assert spec.problems == ()


def test_it_uses_defaults_when_flags_are_absent(tmp_path):
    spec = parse_skill_dir(write_skill(tmp_path, "plain", "---\ndescription: d\n---\n"))
    assert (spec.disable_model_invocation, spec.user_invocable, spec.mode) == (False, True, False)
    assert spec.model_invocable


def test_it_keeps_unknown_keys_and_warns_about_them(tmp_path):
    text = "---\ndescription: d\nfavourite-colour: blue\nallowed_tools: Read\n---\n"
    spec = parse_skill_dir(write_skill(tmp_path, "extra", text))
    assert spec.frontmatter["favourite-colour"] == "blue"
    assert spec.frontmatter["allowed_tools"] == "Read"
    warnings = {p.message.split("`")[1]: p for p in spec.warnings}
    assert set(warnings) == {"favourite-colour", "allowed_tools"}
    assert all(p.rule == "unknown-key" for p in warnings.values())
    assert "did you mean `allowed-tools`" in warnings["allowed_tools"].message
    assert warnings["favourite-colour"].line == 3


def test_it_maps_model_inherit_to_none_and_keeps_other_fields(tmp_path):
    text = (
        "---\ndescription: d\nmodel: inherit\neffort: high\ncontext: fork\nagent: Explore\n"
        "version: 1.2\npaths: 'src/**, docs/*.md'\ndisallowed-tools: [Write]\n"
        "hooks:\n  PreToolUse: []\ncompatibility: Needs python3\nwhen_to_use: Later.\n---\n"
    )
    spec = parse_skill_dir(write_skill(tmp_path, "fields", text))
    assert spec.model is None
    assert (spec.effort, spec.context, spec.agent, spec.version) == (
        "high",
        "fork",
        "Explore",
        "1.2",
    )
    assert spec.paths == ("src/**", "docs/*.md")
    assert spec.disallowed_tools == ("Write",)
    assert spec.hooks == {"PreToolUse": []}
    assert spec.compatibility == "Needs python3"
    assert spec.when_to_use == "Later."
    assert spec.problems == ()
    other = parse_skill_dir(
        write_skill(tmp_path, "model", "---\ndescription: d\nmodel: claude-opus-4-1\n---\n")
    )
    assert other.model == "claude-opus-4-1"


def test_it_reports_yaml_that_does_not_parse_with_file_and_line(tmp_path):
    folder = write_skill(
        tmp_path, "broken", "---\ndescription: fine\ntags: [unclosed\nmore: x\n---\nBody\n"
    )
    with pytest.raises(SkillFileError) as info:
        parse_skill_dir(folder)
    problem = info.value.problem
    assert problem.rule == "yaml"
    assert problem.severity == "error"
    assert problem.file == str(folder / "SKILL.md")
    assert problem.line in (3, 4, 5)
    assert "not valid YAML" in problem.message


def test_it_retries_a_value_with_an_unquoted_colon_as_quoted_text(tmp_path):
    folder = write_skill(tmp_path, "colon", "---\ndescription: Use when: the user asks\n---\n")
    spec = parse_skill_dir(folder)
    assert spec.description == "Use when: the user asks"
    assert [p.rule for p in spec.warnings] == ["yaml-colon"]


def test_it_reports_a_file_that_is_not_utf8(tmp_path):
    folder = write_skill(tmp_path, "latin", "---\ndescription: caf\xe9\n---\n".encode("latin-1"))
    with pytest.raises(SkillFileError) as info:
        parse_skill_dir(folder)
    assert info.value.problem.rule == "encoding"
    assert info.value.problem.file == str(folder / "SKILL.md")
    assert info.value.problem.line == 2


def test_it_reports_a_missing_skill_file_and_an_unclosed_or_non_mapping_frontmatter(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SkillFileError) as info:
        parse_skill_dir(tmp_path / "empty")
    assert info.value.problem.rule == "missing-skill-file"
    with pytest.raises(SkillFileError) as info:
        parse_skill_dir(
            write_skill(tmp_path, "open", "---\ndescription: d\nBody without a closing fence\n")
        )
    assert info.value.problem.rule == "frontmatter-unclosed"
    with pytest.raises(SkillFileError) as info:
        parse_skill_dir(write_skill(tmp_path, "list", b"---\n- a\n- b\n---\n"))
    assert info.value.problem.rule == "frontmatter-shape"


def test_it_names_the_command_after_the_folder_and_accepts_a_given_name(tmp_path):
    folder = write_skill(tmp_path, "deploy", "---\ndescription: d\n---\n")
    assert parse_skill_dir(folder).name == "deploy"
    spec = parse_skill_dir(folder, name="acme:deploy", source="bundled")
    assert (spec.name, spec.source, spec.path, spec.skill_file) == (
        "acme:deploy",
        "bundled",
        folder,
        folder / "SKILL.md",
    )
    assert spec.problems == ()


def test_its_digest_covers_every_file_path_and_byte(tmp_path):
    folder = write_skill(tmp_path, "dig", b"---\ndescription: d\n---\n")
    (folder / "references").mkdir()
    (folder / "references" / "a.md").write_text("alpha")
    first = skill_digest(folder)
    assert parse_skill_dir(folder).digest == first
    assert len(first) == 64
    (folder / "references" / "a.md").write_text("alphA")
    second = skill_digest(folder)
    assert second != first
    (folder / "references" / "a.md").rename(folder / "references" / "b.md")
    assert skill_digest(folder) not in (first, second)
    twin = write_skill(tmp_path / "elsewhere", "other-name", b"---\ndescription: d\n---\n")
    (twin / "references").mkdir()
    (twin / "references" / "b.md").write_text("alphA")
    assert skill_digest(twin) == skill_digest(folder)


def test_its_digest_ignores_git_and_node_modules(tmp_path):
    folder = write_skill(tmp_path, "dig", "---\ndescription: d\n---\n")
    before = skill_digest(folder)
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD").write_text("ref")
    (folder / "node_modules").mkdir()
    (folder / "node_modules" / "x.js").write_text("x")
    assert skill_digest(folder) == before


def test_it_parses_text_for_a_folder_that_does_not_exist_yet(tmp_path):
    spec = parse_skill_text(
        "\ufeff---\r\ndescription: From text.\r\n---\r\nBody\r\n",
        directory=tmp_path / "new",
        name="new",
    )
    assert spec.description == "From text."
    assert spec.body == "Body\n"
    assert spec.skill_file == tmp_path / "new" / "SKILL.md"
    assert len(spec.digest) == 64


def test_it_exposes_errors_and_warnings_separately(tmp_path):
    text = "---\nname: Bad_Name\ndescription: d\nunknown: 1\n---\n"
    spec = parse_skill_dir(write_skill(tmp_path, "good-dir", text))
    assert {p.rule for p in spec.errors} == {"name-format"}
    assert {p.rule for p in spec.warnings} == {"unknown-key", "name-matches-directory"}


def test_an_impossible_date_is_a_yaml_error_naming_the_file_not_a_crash(tmp_path):
    from skills_app.core.registry import SkillRegistry, SkillSource

    bad = tmp_path / "root" / "dated"
    bad.mkdir(parents=True)
    (bad / "SKILL.md").write_text("---\ndescription: x\nversion: 2024-13-45\n---\nbody\n")
    good = tmp_path / "root" / "fine"
    good.mkdir()
    (good / "SKILL.md").write_text("---\ndescription: fine\n---\nbody\n")
    with pytest.raises(SkillFileError) as info:
        parse_skill_dir(bad)
    assert info.value.problem.rule == "yaml" and "quote it" in info.value.problem.message
    registry = SkillRegistry([SkillSource("dirs", tmp_path / "root")])
    assert [s.name for s in registry.skills()] == ["fine"]
    assert any("dated" in p.file for p in registry.errors)


# -- spec parity (issue #28): what the reference validator reads, we read ---------------------


def test_a_name_yaml_would_type_is_read_as_written(tmp_path):
    for name in ("yes", "no", "123", "null-and-void"):
        spec = parse_skill_dir(
            write_skill(tmp_path, name, f"---\nname: {name}\ndescription: d\n---\n")
        )
        assert spec.frontmatter["name"] == name
        assert spec.problems == ()
    spec = parse_skill_dir(
        write_skill(tmp_path, "v", "---\nname: v\ndescription: 42\nversion: 1.10\n---\n")
    )
    assert (spec.description, spec.version) == ("42", "1.10")
    assert spec.problems == ()


def test_a_missing_name_is_a_warning_that_names_the_fix(tmp_path):
    spec = parse_skill_dir(write_skill(tmp_path, "nameless", b"---\ndescription: d\n---\n"))
    assert spec.name == "nameless"
    [problem] = spec.problems
    assert (problem.rule, problem.severity) == ("name-missing", "warning")
    assert "add `name: nameless`" in problem.message


def test_duplicate_keys_are_errors_naming_both_lines(tmp_path):
    text = b"---\nname: dup\ndescription: one\nmetadata:\n  a: 1\n  a: 2\ndescription: two\n---\n"
    spec = parse_skill_dir(write_skill(tmp_path, "dup", text))
    found = [(p.rule, p.line) for p in spec.errors]
    assert found == [("duplicate-key", 6), ("duplicate-key", 7)]
    assert "lines 3 and 7" in spec.errors[1].message


def test_a_frontmatter_after_blank_lines_is_an_error_and_still_read(tmp_path):
    text = b"\n\n---\nname: late\ndescription: The real description.\n---\nBody.\n"
    spec = parse_skill_dir(write_skill(tmp_path, "late", text))
    assert [(p.rule, p.severity) for p in spec.problems] == [("frontmatter-misplaced", "error")]
    assert spec.description == "The real description." and spec.body == "Body.\n"
    assert "after 2 blank line(s)" in spec.problems[0].message


def test_wrongly_capitalised_keys_get_a_hint(tmp_path):
    text = b"---\nName: caps\nDescription: d\n---\nBody text.\n"
    spec = parse_skill_dir(write_skill(tmp_path, "caps", text))
    hints = [p.message for p in spec.problems if p.rule == "unknown-key"]
    assert hints == [
        "unknown frontmatter key `Name`: keys are case-sensitive: did you mean `name`? `Name` is not read",
        "unknown frontmatter key `Description`: keys are case-sensitive: did you mean `description`? `Description` is not read",
    ]
