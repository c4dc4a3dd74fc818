from __future__ import annotations

from pathlib import Path

import pytest

from skills_app.core.render import has_placeholder, render_skill, split_args, substitute
from skills_app.core.skillfile import parse_skill_text


def sub(body: str, args: str = "", arguments: tuple[str, ...] = ()) -> str:
    return substitute(
        body, args, arguments=arguments, skill_dir="/skills/demo", session_id="sess-1"
    )


def skill(body: str, frontmatter: str = "description: d\n"):
    return parse_skill_text(
        f"---\n{frontmatter}---\n{body}", directory=Path("/skills/demo"), name="demo"
    )


def test_arguments_becomes_the_whole_string_as_typed():
    assert sub("Do: $ARGUMENTS.", 'fix "the bug"  now') == 'Do: fix "the bug"  now.'


def test_indexed_and_dollar_n_forms_are_zero_based_and_shell_quoted():
    assert sub("$ARGUMENTS[0] / $ARGUMENTS[1] / $0 / $1", 'one "two three"') == (
        "one / two three / one / two three"
    )


def test_an_index_with_no_argument_is_left_as_written():
    assert sub("$ARGUMENTS[2] and $5 stay", "a b") == "$ARGUMENTS[2] and $5 stay"


def test_named_arguments_map_to_positions_and_missing_ones_become_empty():
    out = sub("file=$file type=$file_type rest=[$rest]", "a.csv csv", ("file", "file_type", "rest"))
    assert out == "file=a.csv type=csv rest=[]"


def test_an_undeclared_dollar_word_is_left_alone():
    assert sub("$HOME and $file", "x") == "$HOME and $file"


def test_a_single_backslash_escapes_an_argument_token():
    assert sub(r"costs \$1.00, \$ARGUMENTS, \$ARGUMENTS[0], \$name", "x", ("name",)) == (
        "costs $1.00, $ARGUMENTS, $ARGUMENTS[0], $name"
    )


def test_a_doubled_backslash_does_not_escape():
    assert sub(r"path \\$0 end", "x") == r"path \\x end"


def test_claude_variables_are_always_substituted_even_after_a_backslash():
    body = r"${CLAUDE_SKILL_DIR}/scripts/run.py \${CLAUDE_SESSION_ID} ${CLAUDE_SESSION_ID}"
    assert sub(body) == r"/skills/demo/scripts/run.py \sess-1 sess-1"


def test_substituted_values_are_not_rescanned():
    assert sub("$0 $1", "$1 ${CLAUDE_SKILL_DIR}") == "$1 ${CLAUDE_SKILL_DIR}"


def test_split_args_is_tolerant_of_unbalanced_quotes():
    assert split_args('a "b c') == ["a", "b c"]
    assert split_args("it's fine") == ["its fine"]
    assert split_args("trailing\\") == ["trailing"]
    assert split_args("  ") == []


def test_render_starts_with_the_base_directory_and_a_blank_line():
    text = render_skill(
        skill("\nRun ${CLAUDE_SKILL_DIR}/x.sh for $ARGUMENTS.\n"), "now", session_id="s"
    )
    assert text == "Base directory for this skill: /skills/demo\n\nRun /skills/demo/x.sh for now."


def test_render_appends_arguments_when_the_body_has_no_placeholder():
    assert render_skill(skill("Plain body.\n"), "a b", session_id="s") == (
        "Base directory for this skill: /skills/demo\n\nPlain body.\n\nARGUMENTS: a b"
    )


def test_render_appends_nothing_without_arguments():
    assert render_skill(skill("Plain body.\n"), "  ", session_id="s").endswith("Plain body.")


@pytest.mark.parametrize("body", ["Use $0.", "Use $ARGUMENTS[1].", "Use $file."])
def test_any_placeholder_form_stops_the_arguments_line(body):
    spec = skill(body, "description: d\narguments: file\n")
    assert "ARGUMENTS:" not in render_skill(spec, "x", session_id="s")


def test_an_escaped_placeholder_does_not_count_as_one():
    assert not has_placeholder(r"Price \$1.00")
    text = render_skill(skill(r"Price \$1.00" + "\n"), "x", session_id="s")
    assert text.endswith("Price $1.00\n\nARGUMENTS: x")


def test_render_uses_a_given_skill_dir_and_the_session_id():
    spec = skill("${CLAUDE_SKILL_DIR} ${CLAUDE_SESSION_ID}\n")
    text = render_skill(spec, "", skill_dir="/work/staged/demo", session_id="abc")
    assert text == "Base directory for this skill: /work/staged/demo\n\n/work/staged/demo abc"


def test_base_dir_resolves_like_the_claude_skill_dir_variable():
    assert sub("Read({baseDir}/scripts/x.py) or ${CLAUDE_SKILL_DIR}/y") == (
        "Read(/skills/demo/scripts/x.py) or /skills/demo/y"
    )
    assert sub("{basedir} and {baseDir2} stay") == "{basedir} and {baseDir2} stay"


def test_without_the_base_directory_line_it_is_the_substituted_body_alone():
    spec = skill("Use $ARGUMENTS.\n")
    assert render_skill(spec, "x", skill_dir="/s", session_id="s", base_dir_line=False) == (
        "Use x."
    )
    plain = skill("No placeholder.\n")
    assert render_skill(plain, "x", skill_dir="/s", session_id="s", base_dir_line=False) == (
        "No placeholder.\n\nARGUMENTS: x"
    )
