"""webapp.envfile reads environment files by systemd's EnvironmentFile= rules, not a shell's."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO
from webapp import envfile

ROOT = REPO

# (file text, the variables systemd sets). Each row is a rule of src/basic/env-file.c.
CASES = [
    pytest.param("A=1\n", {"A": "1"}, id="plain"),
    pytest.param("A=1", {"A": "1"}, id="no-final-newline"),
    pytest.param("A=1 # the default\n", {"A": "1 # the default"}, id="trailing-comment-is-value"),
    pytest.param("A=1;2\n", {"A": "1;2"}, id="semicolon-in-value"),
    pytest.param("# A=1\n; B=2\nC=3\n", {"C": "3"}, id="comment-lines"),
    pytest.param("   # indented comment\nA=1\n", {"A": "1"}, id="indented-comment"),
    pytest.param("  A  =   1   \n", {"A": "1"}, id="whitespace-around"),
    pytest.param("A=\n", {"A": ""}, id="empty"),
    pytest.param("A=   \n", {"A": ""}, id="only-spaces"),
    pytest.param("A='x # y'\n", {"A": "x # y"}, id="single-quotes"),
    pytest.param("A='a\\nb'\n", {"A": "a\\nb"}, id="single-quotes-keep-backslash"),
    pytest.param('A="  padded  "\n', {"A": "  padded  "}, id="double-quotes-keep-spaces"),
    pytest.param('A="x y"  z \n', {"A": "x yz"}, id="quote-then-more-value"),
    pytest.param("A=x 'y'\n", {"A": "x 'y'"}, id="quotes-inside-value-are-literal"),
    pytest.param('A="q\\"r"\n', {"A": 'q"r'}, id="double-quote-escape"),
    pytest.param('A="b\\\\s"\n', {"A": "b\\s"}, id="double-quote-backslash"),
    pytest.param('A="\\n"\n', {"A": "\\n"}, id="double-quote-other-escape-kept"),
    pytest.param("A=a\\ b\n", {"A": "a b"}, id="unquoted-escape"),
    pytest.param("A=a \\\n", {"A": "a "}, id="escape-protects-trailing-space"),
    pytest.param("A=one\\\ntwo\nB=3\n", {"A": "onetwo", "B": "3"}, id="continuation"),
    pytest.param('A="one\\\ntwo"\n', {"A": "onetwo"}, id="continuation-in-double-quotes"),
    pytest.param("A='one\ntwo'\n", {"A": "one\ntwo"}, id="newline-in-single-quotes"),
    pytest.param("A=1\r\nB=2\r\n", {"A": "1", "B": "2"}, id="crlf"),
    pytest.param("A=1\nA=2\n", {"A": "2"}, id="last-wins"),
    pytest.param("just words\nA=1\n", {"A": "1"}, id="line-without-equals"),
    pytest.param("export A=1\nB=2\n", {"B": "2"}, id="export-is-not-a-keyword"),
    pytest.param("1A=1\nA-B=2\nA B=3\n", {}, id="invalid-names-dropped"),
    pytest.param("A=$HOME/x\n", {"A": "$HOME/x"}, id="no-expansion"),
    pytest.param("A=a=b=c\n", {"A": "a=b=c"}, id="equals-in-value"),
    pytest.param("# note \\\nA=1\n", {"A": "1"}, id="comment-backslash-does-not-continue"),
    pytest.param("A=1\0B=2\n", {"A": "1"}, id="stops-at-nul"),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_it_parses_like_systemd(text, expected):
    assert envfile.parse(text) == expected


def _systemd_parses(tmp_path: Path, text: str) -> dict[str, str] | None:
    """What systemd's own env-file parser makes of TEXT, via the environment.d generator."""
    generator = Path(
        "/usr/lib/systemd/user-environment-generators/30-systemd-environment-d-generator"
    )
    if not os.access(generator, os.X_OK):
        return None
    conf = tmp_path / "environment.d"
    conf.mkdir(exist_ok=True)
    (conf / "50-case.conf").write_text(text)
    result = subprocess.run(
        [str(generator)],
        env={"XDG_CONFIG_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
    )
    # The generator prints NAME=value with systemd's own quoting, which this parser reads back.
    return envfile.parse(result.stdout)


# Cases the environment.d generator reads with the same parser. Left out: `$` (environment.d
# expands variables, EnvironmentFile= does not), empty values (it refuses them, EnvironmentFile=
# sets them empty), values with newlines (its output is one per line),
# comment-backslash (changed in systemd 254; Debian 12 has 252), and NUL.
CROSS_CHECKED = {
    "plain",
    "no-final-newline",
    "trailing-comment-is-value",
    "semicolon-in-value",
    "comment-lines",
    "indented-comment",
    "whitespace-around",
    "single-quotes",
    "single-quotes-keep-backslash",
    "double-quotes-keep-spaces",
    "quote-then-more-value",
    "quotes-inside-value-are-literal",
    "double-quote-escape",
    "double-quote-backslash",
    "double-quote-other-escape-kept",
    "unquoted-escape",
    "escape-protects-trailing-space",
    "continuation",
    "continuation-in-double-quotes",
    "crlf",
    "last-wins",
    "line-without-equals",
    "export-is-not-a-keyword",
    "invalid-names-dropped",
    "equals-in-value",
}


@pytest.mark.parametrize(
    ("text", "expected"), [c for c in CASES if c.id in CROSS_CHECKED], ids=sorted(CROSS_CHECKED)
)
def test_systemd_itself_agrees(tmp_path, text, expected):
    seen = _systemd_parses(tmp_path, text)
    if seen is None:
        pytest.skip("systemd's environment.d generator is not installed (apt-get install systemd)")
    # The generator also prints what other environment.d files on this machine set.
    mine = {name: seen[name] for name in seen if name in {"A", "B", "C"} or name[0].isdigit()}
    assert mine == expected


def test_it_reports_what_systemd_would_silently_keep_or_drop():
    text = "export A=1\nHSTS_SECONDS=31536000   # once HTTPS works\nB=$HOME/x\nC='fine # here'\n"
    found = envfile.problems(text)
    assert len(found) == 3
    assert "line 1" in found[0] and "not a valid variable name" in found[0]
    assert "HSTS_SECONDS" in found[1] and "own line" in found[1]
    assert "B" in found[2] and "does not expand" in found[2]


@pytest.mark.parametrize(
    ("line", "flagged"),
    [
        ('A="quoted" # note', True),
        ("A= # nothing meant", True),
        ("A=x\t; note", True),
        ("A='x # quoted'", False),
        ("A=https://host/#fragment", False),
        ("A=pass#word", False),
    ],
)
def test_it_flags_only_comments_a_shell_would_strip(line, flagged):
    assert bool(envfile.problems(line + "\n")) is flagged


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "webapp.envfile", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_the_command_runs_a_program_with_only_the_file_and_a_service_base(tmp_path):
    env_file = tmp_path / "env"
    env_file.write_text("A='from file'\nPATH_EXTRA=1\n")
    show = "import os, json; print(json.dumps(dict(os.environ)))"
    caller = {"PATH": os.environ["PATH"], "HOME": "/h", "SECRET_FROM_SHELL": "x", "A": "shell"}
    result = _run(str(env_file), "--", sys.executable, "-c", show, env=caller)
    assert result.returncode == 0, result.stderr
    seen = __import__("json").loads(result.stdout)
    assert seen["A"] == "from file"
    assert seen["HOME"] == "/h"
    assert "SECRET_FROM_SHELL" not in seen  # what the shell had does not leak into the service


def test_with_defaults_the_callers_environment_wins(tmp_path):
    env_file = tmp_path / ".env"
    env_file.write_text("A=from-file\nB=from-file\n")
    show = "import os; print(os.environ['A'], os.environ['B'])"
    caller = {"PATH": os.environ["PATH"], "A": "from-shell"}
    result = _run("--defaults", str(env_file), "--", sys.executable, "-c", show, env=caller)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["from-shell", "from-file"]


def test_check_fails_on_a_trailing_comment_and_says_where(tmp_path):
    env_file = tmp_path / "env"
    env_file.write_text("A=1\nSECRET_KEY_FILE=/etc/skillscope/secret_key  # head -c 50 ...\n")
    result = _run("--check", str(env_file))
    assert result.returncode == 1
    assert "line 2" in result.stderr and "SECRET_KEY_FILE" in result.stderr


def test_it_prints_the_variables_shell_quoted(tmp_path):
    env_file = tmp_path / "env"
    env_file.write_text("A='two words'\n")
    result = _run(str(env_file))
    assert result.stdout == "A='two words'\n"


def test_a_missing_file_is_a_clear_error(tmp_path):
    result = _run(str(tmp_path / "nope"))
    assert result.returncode == 1
    assert "cannot be read" in result.stderr


@pytest.mark.skipif(shutil.which("true") is None, reason="needs the `true` program")
def test_a_missing_program_is_a_clear_error(tmp_path):
    env_file = tmp_path / "env"
    env_file.write_text("A=1\n")
    result = _run(str(env_file), "--", str(tmp_path / "no-such-program"))
    assert result.returncode == 127
    assert "cannot be run" in result.stderr
