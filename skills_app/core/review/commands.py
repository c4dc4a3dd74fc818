"""The commands a skill's text asks the model to run, and the paths in them.

Found in Markdown text (SKILL.md's body and the documents it points at):

- every line of a fenced block whose language is a shell (`bash`, `sh`, `shell`, `console`,
  `zsh`, `terminal`): a `$ ` or `% ` prompt is dropped, a line ending in `\\` continues on the
  next, comments and (in `console` blocks) output lines are skipped;
- inline code that reads as a command: its first word is a known program (`python3`, `git`,
  `curl`, ...) followed by more words, or a path to a script (`scripts/x.py`,
  `${CLAUDE_SKILL_DIR}/scripts/x.py`, `{baseDir}/...`, `./x.sh`);
- not `!` dynamic-context commands (they run before the body is delivered; `core.dynamic` finds
  them) and not ```` ```! ```` blocks.

An inline command on a line that tells the model not to run it ("Do not run `git commit`") is
found but marked `negated`, so a manifest lists it without consenting to it.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

SHELL_LANGUAGES = frozenset(
    {"bash", "sh", "shell", "console", "zsh", "terminal", "shell-session", "sh-session"}
)
PROGRAMS = frozenset(
    {
        "python", "python3", "node", "npm", "npx", "pnpm", "yarn", "bash", "sh", "zsh", "git",
        "make", "pip", "pip3", "uv", "uvx", "poetry", "cargo", "go", "ruby", "perl", "php",
        "java", "deno", "bun", "curl", "wget", "rm", "mv", "cp", "mkdir", "chmod", "chown",
        "cat", "ls", "grep", "rg", "find", "sed", "awk", "jq", "tar", "zip", "unzip", "docker",
        "kubectl", "gh", "ssh", "scp", "rsync", "sudo", "pytest", "ruff", "mypy", "black",
        "pandoc", "soffice", "libreoffice", "convert", "ffmpeg", "sqlite3", "psql", "echo",
        "printf", "head", "tail", "wc", "sort", "uniq", "diff", "touch", "tee", "xargs",
        "env", "timeout", "open", "xdg-open", "pdftotext", "qpdf",
    }
)  # fmt: skip
# Where a skill's own files are: the variables that resolve to the staged skill folder.
SKILL_DIR_VARS = ("${CLAUDE_SKILL_DIR}", "{baseDir}", "$CLAUDE_SKILL_DIR")
_FENCE = re.compile(r"^(?P<indent>[ \t]{0,3})(?P<mark>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)$")
_INLINE = re.compile(r"(?<![`!])`(?P<code>[^`\n]+)`(?!`)")
_NEGATION = re.compile(
    r"\b(?:do not|don't|dont|never|avoid|must not|should not|shouldn't|no need to)\b", re.I
)
_PROMPT = re.compile(r"^[$%]\s+")
_RUN_VERB = re.compile(r"\b(?:run|runs|running|execute|call|invoke|start|use)\b[^`]*$", re.I)
_SCRIPT_SUFFIX = re.compile(r"\.(?:py|sh|bash|js|mjs|ts|rb|pl|php)$")


@dataclass(frozen=True, slots=True)
class FoundCommand:
    """A command found in a text: exactly as written, its 1-based line, how it was written."""

    text: str
    line: int
    form: str  # "block" | "inline"
    negated: bool = False


def _block_commands(lines: list[str], language: str, first: int) -> list[FoundCommand]:
    found: list[FoundCommand] = []
    pending: list[str] = []
    start = first
    console = language in ("console", "terminal", "shell-session", "sh-session")
    for offset, raw in enumerate(lines):
        line = raw.strip()
        if not pending:
            start = first + offset
            if not line or line.startswith("#"):
                continue
            prompted = _PROMPT.match(line)
            if console and not prompted:
                continue  # output shown in a console transcript, not a command
            if prompted:
                line = line[prompted.end() :]
        if line.endswith("\\"):
            pending.append(line[:-1].rstrip())
            continue
        pending.append(line)
        text = " ".join(p for p in pending if p)
        pending = []
        if text:
            found.append(FoundCommand(text, start, "block"))
    if pending:
        found.append(FoundCommand(" ".join(p for p in pending if p), start, "block"))
    return found


def _reads_as_command(code: str, before: str) -> bool:
    """Inline code that is a command: a program with words, or a script path asked to be run."""
    words = code.split()
    if not words:
        return False
    first = words[0]
    path = any(first.startswith(v) for v in SKILL_DIR_VARS) or first.startswith(("./", "scripts/"))
    if path:
        # `${CLAUDE_SKILL_DIR}/references/tone.md` alone is a file to read, not to run.
        script = bool(_SCRIPT_SUFFIX.search(first)) or "/scripts/" in f"/{first}"
        return len(words) > 1 or (script and bool(_RUN_VERB.search(before)))
    if first in PROGRAMS and len(words) > 1:
        # `python3 -c` or `git status`, not a lone program name in a sentence.
        return not (first == "cat" and len(words) == 2 and words[1].startswith("<"))
    return False


def find_commands(text: str, *, first_line: int = 1) -> list[FoundCommand]:
    """The commands `text` asks the model to run, in order; `first_line` is text's first line."""
    found: list[FoundCommand] = []
    lines = text.split("\n")
    i = 0
    prose: list[tuple[int, str]] = []
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            prose.append((first_line + i, lines[i]))
            i += 1
            continue
        mark, info = m["mark"], m["info"].strip()
        end = i + 1
        while end < len(lines):
            close = lines[end].strip()
            if close.startswith(mark[0] * len(mark)) and not close.strip(mark[0]):
                break
            end += 1
        language = info.split(None, 1)[0].lower() if info else ""
        if language in SHELL_LANGUAGES:
            found += _block_commands(lines[i + 1 : end], language, first_line + i + 1)
        i = end + 1
    for number, line in prose:
        for m in _INLINE.finditer(line):
            code = m["code"].strip()
            code = _PROMPT.sub("", code)
            if _reads_as_command(code, line[: m.start()]):
                negated = bool(_NEGATION.search(line[: m.start()]))
                found.append(FoundCommand(code, number, "inline", negated))
    found.sort(key=lambda c: c.line)
    return found


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command, comments=False)
    except ValueError:
        return command.split()


def _plain(word: str) -> str:
    """A word as a path: without `./` and an `a=b` option's name."""
    if "=" in word and not word.startswith(("./", "/")):
        word = word.split("=", 1)[1]
    while word.startswith("./"):
        word = word[2:]
    return word


def runs_from_skill_dir(command: str) -> bool:
    """True when the command first changes into the skill's folder (`cd {baseDir} && ...`)."""
    words = _words(command)
    return (
        len(words) >= 2 and words[0] == "cd" and any(words[1].startswith(v) for v in SKILL_DIR_VARS)
    )


def relative_skill_paths(command: str, files: frozenset[str]) -> list[str]:
    """Files of the skill a command names by a path relative to where it runs (the workspace).

    `python3 scripts/report.py` runs `scripts/report.py` *of the workspace*: the skill's copy is
    staged elsewhere, so the command fails, or runs whatever someone wrote at that path.
    """
    if runs_from_skill_dir(command):
        return []
    out: list[str] = []
    for word in _words(command):
        path = _plain(word)
        if not path or path.startswith(("/", "$", "{", "~")):
            continue
        named = path in files or (path.startswith("scripts/") and _SCRIPT_SUFFIX.search(path))
        if named and path not in out:
            out.append(path)
    return out


def skill_dir_paths(command: str) -> list[str]:
    """The skill files a command names through the skill folder variable, relative to it."""
    out: list[str] = []
    for word in _words(command):
        for var in SKILL_DIR_VARS:
            at = word.find(var + "/")
            if at != -1:
                rel = word[at + len(var) + 1 :].rstrip("\"'")
                if rel and rel not in out:
                    out.append(rel)
    return out


def _normal(rel: str) -> str:
    """A relative path without `.` and doubled slashes; a `..` that leaves the folder is kept."""
    parts: list[str] = []
    for part in rel.split("/"):
        if part in ("", "."):
            continue
        if part == ".." and parts and parts[-1] != "..":
            parts.pop()
        else:
            parts.append(part)
    return "/".join(parts)


def named_skill_files(command: str) -> list[str]:
    """The paths in the skill's folder a command names, relative to it: every path through the
    skill folder variable, and after a `cd` into the folder, each word that is a relative path
    (`./x`, `../x`) or a script path (`scripts/...`, a script suffix)."""
    found = list(skill_dir_paths(command))
    if runs_from_skill_dir(command):
        for word in _words(command)[2:]:
            explicit = word.startswith(("./", "../"))
            path = word if explicit else _plain(word)
            if explicit or (
                path
                and not path.startswith(("/", "$", "{", "~", "-"))
                and (_SCRIPT_SUFFIX.search(path) or path.startswith("scripts/"))
            ):
                found.append(path)
    out: list[str] = []
    for path in found:
        rel = _normal(path)
        if rel and rel not in out:
            out.append(rel)
    return out


__all__ = [
    "PROGRAMS",
    "SHELL_LANGUAGES",
    "SKILL_DIR_VARS",
    "FoundCommand",
    "find_commands",
    "named_skill_files",
    "relative_skill_paths",
    "runs_from_skill_dir",
    "skill_dir_paths",
]
