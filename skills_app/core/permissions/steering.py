"""Files that steer programs: writes to them need an allow rule that names them.

An allowed program reads more than its command line: git reads `.git/config` and
`.gitattributes`, Python the script's folder and `*.pth` files, node `node_modules/`, npm and
curl dotfiles. A file the model writes there would make an allowed command run the model's code,
a command nobody allowed. So, in the spirit of Claude Code's protected paths, a write to such a
file is not covered by a broad rule (`Edit(**)`, `Edit(./work/*.py)`, a bare `Edit`, the Write
default): only an allow rule whose pattern names the file's kind literally covers it
(`Edit(.git/**)`, `Edit(**/*.pth)`, `Edit(./work/json.py)`); otherwise the person is asked.
Deny and ask rules apply as everywhere.

The Bash tool's environment (`tools/env.py` `PROGRAM_SWITCHES`, and `$HOME` as a fresh empty
folder outside the workspace) covers the same programs from the other side: what they would read
from `$HOME`, and the settings of theirs that run commands.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
import sys
from dataclasses import dataclass

from ..rulematch import is_inside

# Top-level standard-library module names: a `json.py` beside a script shadows `import json`.
_STDLIB = frozenset(sys.stdlib_module_names) - {"__future__"}
_CUSTOMIZE = ("sitecustomize.py", "usercustomize.py")


@dataclass(frozen=True, slots=True)
class Steering:
    """Why writing a path steers a program, and the literal a rule must contain to cover it."""

    why: str
    literal: str  # the path segment (or suffix, for `.pth`) an explicit rule names
    suffix: bool = False
    example: str = ""


def steering(target: str, workspace: str) -> Steering | None:
    """Why a write to `target` (absolute, normalised) steers a program, or None."""
    if target == workspace or not is_inside(target, workspace):
        return None
    parts = posixpath.relpath(target, workspace).split("/")
    name = parts[-1]
    if ".git" in parts:
        return Steering(
            "git reads its configuration and hooks from .git/ (core.fsmonitor, filters and "
            "aliases there run commands)",
            ".git",
            example="Edit(.git/**)",
        )
    if parts[0].startswith(".") and parts[0] not in (".", ".."):
        return Steering(
            f"{parts[0]} at the workspace root is a start-up or configuration file of the "
            "programs run there (npm, git, pip, shells and more)",
            parts[0],
            example=f"Edit(./{parts[0]}{'/**' if len(parts) > 1 else ''})",
        )
    if "node_modules" in parts:
        return Steering(
            "node loads require()d modules from node_modules/ beside a script",
            "node_modules",
            example="Edit(./**/node_modules/**)",
        )
    if name.endswith(".pth"):
        return Steering(
            "Python runs the import lines of .pth files in its site-packages folders",
            ".pth",
            suffix=True,
            example="Edit(**/*.pth)",
        )
    if name in _CUSTOMIZE:
        return Steering(f"Python imports {name} at start-up", name, example=f"Edit(./**/{name})")
    stem, dot, ext = name.rpartition(".")
    module = stem if dot and ext == "py" else None
    if name == "__init__.py" and len(parts) > 1:
        module = parts[-2]
    if module in _STDLIB:
        literal = name if name != "__init__.py" else parts[-2]
        return Steering(
            f"{name if name != '__init__.py' else module + '/'} shadows Python's standard "
            f"module {module} for a script beside it",
            literal,
            example=f"Edit(./{posixpath.relpath(target, workspace)})",
        )
    return None


def _as_fnmatch(segment: str) -> str:
    """A rule's path segment for fnmatch: an escaped character (`\\*`) stands for itself."""
    return re.sub(r"\\(.)", lambda m: f"[{m.group(1)}]" if m.group(1) != "]" else "]", segment)


def _literal(segment: str) -> str | None:
    """The segment's text when it has no wildcard (escapes undone), else None."""
    if re.search(r"(?<!\\)[*?\[]", segment):
        return None
    return re.sub(r"\\(.)", r"\1", segment)


def names_explicitly(pattern: str, found: Steering) -> bool:
    """Whether a path pattern that matched names the steering file's kind literally."""
    segments = pattern.split("/")
    if found.suffix:
        last = segments[-1]
        tail = _literal(last[-len(found.literal) :]) if len(last) >= len(found.literal) else None
        return tail == found.literal
    if found.literal.startswith("."):
        # A segment starting with a literal dot that matches it: `.git`, `.npm*`, `.*`.
        return any(
            s.startswith((".", "\\."))
            and s not in (".", "..")
            and fnmatch.fnmatchcase(found.literal, _as_fnmatch(s))
            for s in segments
        )
    return any(_literal(s) == found.literal for s in segments)


def describe(found: Steering) -> str:
    """The reason an `Edit(**)`-style allow rule does not cover the write."""
    return (
        f"{found.why}; writing it needs an allow rule that names it, such as {found.example} "
        "(a broad rule like Edit(**) does not cover it)"
    )


# What an allowed program also reads, for the rule tester: the files it obeys, and what the
# sandbox's environment does about them.
PROGRAM_NOTES: dict[str, str] = {
    "git": (
        "git also obeys .git/config, .gitattributes and hooks in the repository: filters, "
        "textconv and fsmonitor settings there run commands. Commands get no system or global "
        "git configuration, and core.fsmonitor, core.hooksPath, core.pager, core.sshCommand, "
        "core.editor and the credential helper are forced to harmless values; writing .git/ "
        "needs an Edit rule that names it."
    ),
    "python": (
        "Python also imports modules beside the script (a json.py there shadows the standard "
        "library) and runs .pth and sitecustomize files in site-packages. Commands get no user "
        "site-packages and a fresh, empty $HOME; writing a .pth, a *customize.py or a file "
        "named like a standard module needs an Edit rule that names it."
    ),
    "pip": (
        "pip also reads its configuration files and the .pth files of the environment. Commands "
        "get PIP_CONFIG_FILE=/dev/null, no user site-packages and a fresh $HOME."
    ),
    "node": (
        "node also loads require()d modules from node_modules/ folders beside the script. "
        "Commands get an empty NODE_PATH and a fresh $HOME (no ~/.node_modules); writing "
        "node_modules/ needs an Edit rule that names it."
    ),
    "npm": (
        "npm also reads .npmrc in the folder it runs in and runs package scripts. Commands get "
        "no user or global npmrc; writing dotfiles at the workspace root needs an Edit rule "
        "that names them."
    ),
    "less": (
        "less also reads a lesskey file that can set LESSOPEN (a command run on every file). "
        "Commands get LESSSECURE=1 and LESSKEYIN=/dev/null."
    ),
    "bash": (
        "A login or interactive shell also reads start-up files from $HOME; $HOME is a fresh, "
        "empty folder for every command, outside the workspace."
    ),
    "curl": "curl also reads ~/.curlrc; $HOME is a fresh, empty folder for every command.",
    "wget": "wget also reads ~/.wgetrc; $HOME is a fresh, empty folder for every command.",
}
_PROGRAM_ALIASES = {
    "python3": "python",
    "python3.11": "python",
    "pip3": "pip",
    "sh": "bash",
    "nodejs": "node",
    "npx": "npm",
}


def program_note(command: str) -> str:
    """What the first program of a command also reads and obeys, for the rule tester ("" if none)."""
    for word in command.split():
        if "=" in word and not word.startswith("="):
            continue  # NAME=value before the program
        head = posixpath.basename(word.strip("\"'"))
        key = _PROGRAM_ALIASES.get(head, head)
        if key.startswith("python"):
            key = "python"
        return PROGRAM_NOTES.get(key, "")
    return ""
