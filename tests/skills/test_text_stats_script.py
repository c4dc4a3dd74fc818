"""The bundled text-stats script on its own (issue 42): a path that names no file is reported,
not counted as a word; an attached file (in/) is found by its name; counts agree in number."""

from __future__ import annotations

import subprocess
import sys

from tests.support.paths import REPO

SCRIPT = REPO / "skills" / "text-stats" / "scripts" / "stats.py"


def stats(cwd, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True, timeout=30
    )


def test_a_missing_file_is_reported_and_not_counted_as_a_word(tmp_path):
    done = stats(tmp_path, "README.md")
    assert done.returncode == 1
    assert done.stdout == "README.md is not among this conversation's files: attach it first.\n"
    assert not (tmp_path / "out").exists()


def test_an_attached_file_is_counted_and_one_line_is_one_line(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "README.md").write_text("Hello there\n")
    done = stats(tmp_path, "README.md")
    assert done.returncode == 0
    assert done.stdout.splitlines()[0] == "1 line, 2 words, 12 characters"
    text = stats(tmp_path, "word")
    assert text.stdout.splitlines()[0] == "1 line, 1 word, 4 characters"
    # A version number is text, not a path.
    assert stats(tmp_path, "2.5.0").stdout.splitlines()[0] == "1 line, 1 word, 5 characters"
