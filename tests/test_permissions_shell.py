"""Expansions are code (issue 23): how the rule engine reads words, values and wrappers.

The pieces one by one (`shell_words`, `shell_values`, `shell_wrappers`), then what `analyze`
reports for each construct of docs/security.md, then the decisions they lead to.
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path

import pytest

from skills_app.core.permissions import (
    PermissionContext,
    ToolCall,
    analyze,
    decide,
    parse_rule,
)
from skills_app.core.permissions.shell_values import Values, read_arithmetic
from skills_app.core.permissions.shell_words import (
    Seg,
    Word,
    ansi_c,
    expand,
    join_lines,
    parser_text,
)
from skills_app.core.permissions.shell_wrappers import resolve

WS = Path("/srv/ws/conv-1")


def words(text: str) -> list[str]:
    found, _ = expand([Seg(text)], braces=True, ifs_default=True)
    return [w.text for w in found]


def decision(command: str, *rules: tuple[str, str]) -> tuple[str, str]:
    context = PermissionContext(workspace=WS, admin_rules=[parse_rule(r, b) for b, r in rules])
    made = decide(ToolCall("Bash", {"command": command}), context)
    return made.behavior, made.reason


# --- words ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "read"),
    [
        ("r\\\nm x", "rm x"),
        ('echo "a\\\nb"', 'echo "ab"'),
        ("echo 'a\\\nb'", "echo 'a\\\nb'"),  # single quotes keep it
        ("echo $'a\\\nb'", "echo $'a\\\nb'"),
        ("# note \\\nrm x", "# note \\\nrm x"),  # a comment ends at the newline
        ("cat <<'E'\na\\\nE\nrm x", "cat <<'E'\na\\\nE\nrm x"),  # quoted here-document
        ("cat <<E\na\\\nE\nrm x\nE", "cat <<E\naE\nrm x\nE"),  # unquoted: joined, then matched
        ("echo a\\ #b", "echo a\\ #b"),
    ],
)
def test_it_joins_line_continuations_where_bash_does(written: str, read: str) -> None:
    assert join_lines(written) == read


@pytest.mark.parametrize(
    ("word", "expanded"),
    [
        ("{rm,x}", ["rm", "x"]),
        ("{,rm,x}", ["rm", "x"]),  # an empty alternative is no word
        ("{r..r}m", ["rm"]),
        ("r{m,}", ["rm", "r"]),
        ("{r{m,},x}", ["rm", "r", "x"]),
        ("a{1..3}b", ["a1b", "a2b", "a3b"]),
        ("{01..03}", ["01", "02", "03"]),
        ("{a..e..2}", ["a", "c", "e"]),
        ("{z..x}", ["z", "y", "x"]),
        ("{a}{b,c}", ["{a}b", "{a}c"]),
        ("{}", ["{}"]),
        ("{x}", ["{x}"]),
    ],
)
def test_it_expands_braces_as_bash_does(word: str, expanded: list[str]) -> None:
    assert words(word) == expanded


def test_quoted_braces_and_dollar_braces_are_not_expanded() -> None:
    found, _ = expand([Seg("{rm,x}", quoted=True)], braces=True, ifs_default=True)
    assert [w.text for w in found] == ["{rm,x}"]
    dollar, _ = expand([Seg("{$,}{a,}")], braces=True, ifs_default=True)
    assert dollar[0].text == "$a" and dollar[0].dollar == "$"  # bash would expand $a


def test_too_many_brace_words_are_reported_not_read() -> None:
    found, complete = expand([Seg("{1..100000}")], braces=True, ifs_default=True)
    assert not complete and len(found) <= 256


def test_it_splits_at_an_unquoted_ifs_only_while_ifs_is_the_default() -> None:
    pieces = [Seg("rm"), Seg("${IFS}", dynamic=True, kind="expansion"), Seg("x")]
    split, _ = expand(pieces, braces=True, ifs_default=True)
    assert [(w.text, w.ifs, w.exact) for w in split] == [("rm", True, False), ("x", True, False)]
    kept, _ = expand(pieces, braces=True, ifs_default=False)
    assert [w.text for w in kept] == ["rm${IFS}x"] and not kept[0].literal


def test_it_decodes_ansi_c_strings_as_bash_does() -> None:
    assert ansi_c(r"\x72\x6d") == "rm"
    assert ansi_c(r"\162\155") == "rm"
    assert ansi_c(r"\u0072m") == "rm"
    assert ansi_c(r"\x7") == "\x07"  # one hex digit is enough for bash
    assert ansi_c(r"\cA") == "\x01"
    assert ansi_c(r"\q") == r"\q"  # unknown escapes stay


def test_the_parser_sees_a_glued_brace_as_a_word_and_the_same_length() -> None:
    text = "{rm,x} ${a} { x; } {}"
    shown = parser_text(text)
    assert len(shown) == len(text)
    assert shown.startswith("arm,x}") and "${a}" in shown and "{ x; }" in shown


# --- values --------------------------------------------------------------------------------


def test_it_reads_the_names_an_arithmetic_text_evaluates() -> None:
    found = read_arithmetic("x + a[$i] * 0x1f + 16#ff + ${#s} + ${n:-0} + $((y)) + $1")
    assert found.names == {"x", "a", "i", "n", "y"}
    assert found.blind == ["the positional parameter $1"]
    assert read_arithmetic("$(wc -l < f) + 1").blind == ["the output of a command substitution"]


def test_a_name_is_inert_only_when_every_write_is_a_literal_integer() -> None:
    values = Values()
    values.write("n", "5", "")
    values.write("s", "a[$(rm x)]", "to a text")
    values.write("r", None, "by read")
    assert values.why_suspect("n") == ""
    assert values.why_suspect("never_written") == ""
    assert "to a text" in values.why_suspect("s")
    assert values.why_suspect("REPLY")  # bash sets it from input
    assert values.why_suspect("SKILLSCOPE_HOOK_INPUT")  # the server sets it from the tool input
    values.arithmetic("n + s + r", "`$((...))`")
    assert {f.split(" as ")[0] for f in values.findings()} == {
        "`$((...))` evaluates the value of s",
        "`$((...))` evaluates the value of r",
    }


# --- wrappers ------------------------------------------------------------------------------


def _resolved(command: str) -> tuple[tuple[str, ...], tuple[str, ...], str, bool]:
    result = resolve([Word(w, literal="$" not in w) for w in shlex.split(command)])
    return tuple(w.text for w in result.words), result.assignments, result.blind, result.known


@pytest.mark.parametrize(
    ("command", "real", "assignments"),
    [
        ("command ls -l", ("ls", "-l"), ()),
        ("command -p ls", ("ls",), ()),
        ("builtin echo hi", ("echo", "hi"), ()),
        ("exec -c -l -a name ls", ("ls",), ()),
        ("nice -n 5 ls", ("ls",), ()),
        ("nice -5 ls", ("ls",), ()),
        ("nice --adjustment=3 ls", ("ls",), ()),
        ("timeout -k 1 -s KILL 5 ls", ("ls",), ()),
        ("timeout --preserve-status 2.5s ls", ("ls",), ()),
        ("nohup ls", ("ls",), ()),
        ("time -p ls", ("ls",), ()),
        ("stdbuf -o0 -eL ls", ("ls",), ()),
        ("setsid -w ls", ("ls",), ()),
        ("env -i A=1 ls", ("ls",), ("A=1",)),
        ("env -u X -C /tmp B=2 ls", ("ls",), ("B=2",)),
        ("env -S'rm x' y", ("rm", "x", "y"), ()),
        ("env --split-string='A=1 rm x'", ("rm", "x"), ("A=1",)),
        ("nice timeout 5 env A=1 rm x", ("rm", "x"), ("A=1",)),
        ("/usr/bin/env rm x", ("rm", "x"), ()),
    ],
)
def test_it_looks_through_wrappers_to_the_real_command(
    command: str, real: tuple[str, ...], assignments: tuple[str, ...]
) -> None:
    got_real, got_assignments, blind, known = _resolved(command)
    assert (got_real, got_assignments, blind, known) == (real, assignments, "", True)


def test_it_does_not_guess_through_options_it_does_not_know() -> None:
    _, _, blind, known = _resolved("timeout --bogus 5 rm x")
    assert not known and not blind
    assert _resolved("command -v rm")[3] is False  # command -v runs nothing


def test_a_computed_word_before_the_command_is_blind() -> None:
    assert "computed" in _resolved("timeout $T rm x")[2]
    assert "env -S" in _resolved("env -S 'r${X}m x'")[2]


# --- what analyze reports ------------------------------------------------------------------

HIDDEN = [
    "x='$(rm y)'; echo ${x@P}",
    "echo ${!x}",
    "x='a[1]'; echo $((x))",
    "read v; echo $((v + 1))",
    "echo $(( $(wc -l < f) + 1 ))",
    "declare -i n; n=$1",
    "x=a; [[ $x -eq 1 ]]",
    'let "$x"',
    'eval "$x"',
    'bash -c "$x"',
    "$cmd x",
    '"$(printf rm)" x',
    "/bin/r? x",
    "PATH=work:$PATH; ls",
    "BASH_ENV=f bash x.sh",
    "PS4='$(id)'; set -x",
    "hash -p /usr/bin/rm ls",
    "enable -f ./x.so x",
    "alias ll='ls -l'",
    "echo x | bash",
    "source <(echo id)",
    'printf -v "$n" 1',
    'test -v "$n"',
    "echo x | xargs sh -c",
    "find . $action",
    "bash -lc 'id'",
    "echo 'unterminated",
    "/proc/self/exe -c id",
    "a=rm; {$,}{a,} x",
]
ASK_ONLY = [
    "eval 'ls'",
    "bash -c 'ls'",
    "trap 'ls' EXIT",
    "source venv/bin/activate",
    "echo ${x@Q}",
    "echo ${!prefix*}",
    "rm${IFS}x",
    "diff <(ls a) <(ls b)",
    "coproc ls",
    "find . -name x -exec ls {} +",
    "find . -delete",
    "ls | xargs wc -l",
    "mapfile -C 'ls' -c 1 < f",
    "compgen -W 'a b' x",
    "enable -n echo",
    "declare -n r=x",
    "echo $((1 + 2))",
    "x=5; echo $((x * 2))",
    "for i in 1 2 3; do echo $((i * 2)); done",
    "for ((i = 0; i < 3; i++)); do echo $i; done",
    "n=0; ((n++)); echo $n",
    "[[ 3 -gt 2 ]] && echo y",
    "echo ${a[0]}",
    "let n=1+2",
    "declare -i n=1",
    "command ls",
    "builtin echo hi",
    "env -S'ls -l'",
    'exec ls "$d"',
    "export X=$(date)",
]


@pytest.mark.parametrize("command", HIDDEN)
def test_code_the_parser_cannot_read_is_hidden(command: str) -> None:
    analysis = analyze(command)
    assert analysis.hidden, command
    assert set(analysis.hidden) <= set(analysis.opaque)


@pytest.mark.parametrize("command", ASK_ONLY)
def test_dynamic_but_readable_constructs_are_ask_at_best_not_hidden(command: str) -> None:
    analysis = analyze(command)
    assert analysis.opaque and not analysis.hidden, (analysis.opaque, analysis.hidden)


@pytest.mark.parametrize(
    "command",
    [
        '[ "$x" -eq 1 ] && echo y',  # test's -eq compares, it does not evaluate
        'echo "${args[@]}" "${#args[@]}"',
        "X=$(date); export X",
        "echo ${#x} ${x:-default} ${x/a/b} ${HOME}",
        "echo {a,b} {1..3}",
        "git status && git diff",
        "export FOO=1; python3 x.py",
        "cat <<'E'\n$(not run)\nE",
    ],
)
def test_ordinary_commands_have_no_blind_spot(command: str) -> None:
    analysis = analyze(command)
    assert analysis.opaque == () and analysis.hidden == (), analysis.opaque


def test_the_literal_forms_resolve_to_their_real_command() -> None:
    for command in ("{rm,x}", "coproc rm x", "r\\\nm x", '$"rm" x', "rm${IFS}x",
                    "env --split-string='rm x'", "command rm x", "builtin rm x", "exec rm x",
                    "nice rm x", "timeout 5 rm x", "nohup rm x", "env VAR=1 rm x", "time rm x",
                    "$'\\x72m' x", "{r..r}m x"):  # fmt: skip
        subjects = {s for c in analyze(command).commands for s in c.deny_subjects}
        assert "rm x" in subjects or "VAR=1 rm x" in subjects, command


def test_a_locale_variable_makes_translated_strings_computed() -> None:
    assert analyze('$"ls" x').hidden == ()
    assert analyze('LANGUAGE=fr $"ls" x').hidden  # $"ls" may translate to another name


# --- decisions -----------------------------------------------------------------------------

DENY_RM = ("deny", "Bash(rm *)")


def test_hidden_code_is_denied_while_a_bash_deny_rule_is_in_force() -> None:
    behavior, reason = decision("a=rm; $a x", DENY_RM)
    assert behavior == "deny"
    assert "the command name comes from an expansion ($a)" in reason
    assert "write the program's name literally" in reason
    assert 'deny rule "Bash(rm *)"' in reason


def test_hidden_code_asks_when_no_deny_rule_could_be_walked_around() -> None:
    behavior, reason = decision("a=ls; $a x", ("allow", "Bash(echo *)"))
    assert behavior == "ask" and "comes from an expansion" in reason
    assert decision("a=ls; $a x", ("allow", "Bash"))[0] == "allow"  # a bare allow is trust


def test_a_bare_allow_does_not_beat_hidden_code_under_a_deny_rule() -> None:
    assert decision("a=rm; $a x", DENY_RM, ("allow", "Bash"))[0] == "deny"
    assert (
        decision("x='$(id)'; echo ${x@P}", ("ask", "Bash(git push *)"), ("allow", "Bash"))[0]
        == "ask"
    )


def test_an_allow_rule_never_waves_hidden_code_through() -> None:
    echo = ("allow", "Bash(echo *)")
    for command in ("x='a[$(id)]'; echo $((x))", "echo ${x@P}", "echo ${!x}",
                    "declare -i n; n=$v; echo $n", "read v; echo $((v))"):  # fmt: skip
        assert decision(command, echo)[0] == "ask", command


def test_an_allow_rule_matches_the_resolved_command() -> None:
    ls = ("allow", "Bash(ls *)")
    assert decision("{ls,-l}", ls)[0] == "allow"
    assert decision("time -p ls", ls)[0] == "allow"
    assert decision("nice -n 5 ls", ls)[0] == "allow"
    # env's assignments stay in front, like VAR=x prefixes: the rule must name them.
    assert decision("env MODE=x ls", ls)[0] == "ask"
    assert decision("env MODE=x ls", ("allow", "Bash(MODE=x ls *)"))[0] == "allow"
    # Resolved but dynamic: never allowed.
    assert decision("ls${IFS}-l", ls)[0] == "ask"
    assert decision("eval 'ls -l'", ls)[0] == "ask"
    assert decision("command ls -l", ls)[0] == "ask"  # command takes its command as data


def test_find_delete_is_rm_for_deny_rules() -> None:
    assert decision("find work -name '*.tmp' -delete", DENY_RM)[0] == "deny"
    assert decision("find work -delete", ("deny", "Bash(rm -rf *)"))[0] == "deny"
    assert decision("find work -name x -print", DENY_RM, ("allow", "Bash(find *)"))[0] == "allow"


def test_every_reason_says_what_to_write_instead() -> None:
    for command in HIDDEN:
        analysis = analyze(command)
        assert any(
            word in reason.lower()
            for reason in analysis.hidden
            for word in ("write", "use", "name", "leave", "drop", "call", "pass", "split")
        ), analysis.hidden


def test_arithmetic_over_literal_integers_asks_but_is_not_denied() -> None:
    # Never allowed unasked (bash evaluates it), yet it cannot run a command: no deny.
    for command in ("echo $((1 + 2))", "for i in 1 2 3; do echo $((i * 2)); done"):
        assert decision(command, DENY_RM, ("allow", "Bash(echo *)"))[0] == "ask"
    assert decision("read n; echo $((n))", DENY_RM, ("allow", "Bash(echo *)"))[0] == "deny"


@pytest.mark.parametrize(
    "command",
    [
        "{" * 50_000,  # every `{` looking for its pair: quadratic before MAX_BRACES
        "echo " + "{a," * 3_000 + "}" * 3_000,
        "$(" * 3_000 + ")" * 3_000,  # Node.parent is quadratic in deep trees: not used
        "echo " + " x" * 40_000,
        "echo $((" + "x+" * 30_000 + "1))",
        "cat <<E\n" + "a\\\n" * 30_000 + "E",
    ],
    ids=["braces", "nested-braces", "nested-substitutions", "words", "arithmetic", "heredoc"],
)
def test_hostile_commands_are_read_in_bounded_time(command: str) -> None:
    # Generous: a shared machine is slow; the quadratic cases this guards against took minutes.
    started = time.monotonic()
    analyze(command)
    assert time.monotonic() - started < 15


def test_a_bare_allow_trusts_what_the_rules_can_read() -> None:
    everything = ("allow", "Bash")
    assert decision("echo $((1 + 2))", DENY_RM, everything)[0] == "allow"
    assert decision("eval 'ls'", ("ask", "Bash(git push *)"), everything)[0] == "allow"
    # Hidden code could be the command the ask rule names.
    assert decision('eval "$x"', ("ask", "Bash(git push *)"), everything)[0] == "ask"
