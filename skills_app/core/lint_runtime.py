"""Lint for what breaks when the skill runs, beside the spec checks of `lint` (kept apart so the
two can change independently).

- `script-path`: a command names one of the skill's files by a path relative to where the model
  runs commands (the conversation's workspace), so the file is not found there, or something
  else at that path runs. The fix: `${CLAUDE_SKILL_DIR}/scripts/x.py` (or `{baseDir}/...`).
- `missing-file`: the body (or a command in it) points at a file the package does not have;
  the message names the file.
- `broad-allowed-tools`: an `allowed-tools` rule that pre-approves destructive or unbounded
  commands (`Bash` with no pattern, `rm -rf *`, `curl *`, an interpreter with any arguments).

Each problem is reported once (per file, per rule text), however often the body repeats it.
Messages name paths and rules, never the body's prose (they are shown on the Skills page).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from urllib.parse import unquote

from .dynamic import find_placeholders
from .permissions import RuleSyntaxError, parse_rule
from .review.commands import find_commands, relative_skill_paths, skill_dir_paths
from .review.package import PackageFile, read_package
from .review.words import breadth_warning
from .skillfile import SkillSpec
from .skilltypes import Problem

RULES = ("script-path", "missing-file", "broad-allowed-tools")
_LINK = re.compile(r"\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+[\"'][^\n]*?[\"'])?\s*\)")
_TICKED = re.compile(r"`(?:\./)?((?:references|scripts|assets)/[^`\s]+)`")
_SKILL_DIR_REF = re.compile(r"(?:\$\{CLAUDE_SKILL_DIR\}|\{baseDir\})/([^\s`'\")\]}>|]+)")


def _body_line(spec: SkillSpec, files: Sequence[PackageFile]) -> int:
    source = next((f.text for f in files if f.rel == spec.skill_file.name), None) or ""
    at = source.find(spec.body) if spec.body else -1
    return source.count("\n", 0, at) + 1 if at >= 0 else 1


def _references(body: str) -> Iterable[tuple[str, int]]:
    """(relative path, offset) of every file the body points at."""
    for m in _LINK.finditer(body):
        target = m[1]
        if "://" in target or target.startswith(("#", "mailto:", "/", "$", "{", "~", "<")):
            continue
        yield unquote(target.split("#", 1)[0].split("?", 1)[0]), m.start()
    for pattern in (_TICKED, _SKILL_DIR_REF):
        for m in pattern.finditer(body):
            yield m[1].rstrip(".,;:"), m.start()


def lint_runtime(spec: SkillSpec, files: Sequence[PackageFile]) -> list[Problem]:
    """The run-time problems of a parsed skill whose files are `files`."""
    names = frozenset(f.rel for f in files)
    folders = frozenset(str(p) for f in files for p in Path(f.rel).parents if str(p) != ".")
    first = _body_line(spec, files)
    problems: list[Problem] = []
    reported: set[tuple[str, str]] = set()

    def report(rule: str, key: str, message: str, line: int | None) -> None:
        if (rule, key) not in reported:
            reported.add((rule, key))
            problems.append(Problem("warning", rule, message, str(spec.skill_file), line))

    commands: list[tuple[str, int | None]] = [
        (c.text, first + c.line - 1) for c in find_commands(spec.body)
    ]
    commands += [
        (p.command, first + spec.body.count("\n", 0, p.start)) for p in find_placeholders(spec.body)
    ]
    for text in spec.allowed_tools:
        if text.startswith("Bash(") and text.endswith(")"):
            commands.append((text[5:-1].replace("*", " "), None))
    for command, line in commands:
        for rel in relative_skill_paths(command, names):
            found = "whatever the workspace holds there runs" if rel in names else "it is not found"
            report(
                "script-path",
                rel,
                f"`{rel}` is run by a path relative to the workspace, where the model runs "
                f"commands, so {found}, not the skill's own file; write `${{CLAUDE_SKILL_DIR}}/{rel}` (or `{{baseDir}}/{rel}`), or tell the "
                "model to run it from the base directory the skill is loaded with",
                line,
            )
        for rel in skill_dir_paths(command):
            rel = rel.rstrip(".,;:")
            if rel and rel not in names and rel not in folders and not _wild(rel):
                report(
                    "missing-file",
                    rel,
                    f"the skill runs `{rel}`, which is not in the package; add it or fix the path",
                    line,
                )
    for rel, offset in _references(spec.body):
        rel = rel.removeprefix("./")
        if rel and rel not in names and rel not in folders and not _wild(rel):
            report(
                "missing-file",
                rel,
                f"the body refers to `{rel}`, which is not in the package; add the file or fix "
                "the path",
                first + spec.body.count("\n", 0, offset),
            )
    for text in spec.allowed_tools:
        try:
            rule = parse_rule(text, "allow", source="skill")
        except RuleSyntaxError:
            continue
        if rule.tool != "Bash":
            continue
        broad = breadth_warning(rule.specifier)
        if broad:
            report(
                "broad-allowed-tools",
                text,
                f"`allowed-tools: {text}` pre-approves more than one job needs ({broad}); name "
                "the exact command, e.g. `Bash(python3 ${CLAUDE_SKILL_DIR}/scripts/x.py *)`",
                None,
            )
    return problems


def _wild(rel: str) -> bool:
    return any(c in rel for c in "*?$[{<")


def lint_runtime_dir(directory: Path, spec: SkillSpec) -> list[Problem]:
    """The run-time problems of the skill in `directory`."""
    return lint_runtime(spec, read_package(directory))


def merge(problems: Sequence[Problem], runtime: Sequence[Problem]) -> list[Problem]:
    """Spec lint and run-time lint as one report: a file reported missing by name replaces the
    spec lint's unnamed `missing-reference` on the same line."""
    named = {p.line for p in runtime if p.rule == "missing-file"}
    kept = [p for p in problems if not (p.rule == "missing-reference" and p.line in named)]
    return [*kept, *runtime]


__all__ = ["RULES", "lint_runtime", "lint_runtime_dir", "merge"]
