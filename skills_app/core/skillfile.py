"""SKILL.md -> SkillSpec: frontmatter parsing and lint against the Agent Skills rules.

Severity policy. *Errors* break the Agent Skills spec in ways a skill cannot work with (name
format, description missing with no fallback or not a string, compatibility too long, a boolean
that is not a boolean, a field of the wrong type); `validate` and uploads refuse them. *Warnings*
are advice (unknown keys, name differing from the directory, description taken from the body,
absolute paths, references to files that are not in the folder) and spec overshoots that Claude
Code and the official skills accept (a description over 1,024 characters, a large body:
`lint.SPEC_OVERSHOOT_RULES`); `skills validate --strict` also fails on what the spec requires and Claude
Code lets pass (`lint.STRICT_RULES`: no frontmatter, no `name`, a name other than the folder's,
unknown keys). Discovery is lenient, as the Agent Skills client
guide recommends: a skill with errors still loads, with its problems attached. Only a skill that
cannot be read at all (YAML that does not parse, not UTF-8, no SKILL.md) raises SkillFileError,
and the registry skips it and reports the error. The frontmatter is read by `frontmatter` (bounded:
size, no YAML anchors or aliases, nesting depth), the checks live in `lint`, the folder walk and
digest in `tree`; their public names are re-exported here.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import frontmatter
from .lint import (
    EFFORTS,
    KNOWN_KEYS,
    MAX_COMPATIBILITY,
    Fields,
    check_keys,
    check_name,
    description_of,
    lint_body,
    name_format_problem,
)
from .skilltypes import Problem, SkillFileError
from .tree import TreeEntry, digest_update, find_skill_file, skill_digest, walk_skill_tree

# parse_skill_tree reads through this module-level name, so tests can patch it to count reads.
from .tree import read_file as _read

__all__ = [
    "EFFORTS",
    "KNOWN_KEYS",
    "Problem",
    "SkillFileError",
    "SkillSpec",
    "TreeEntry",
    "find_skill_file",
    "lint_skill_dir",
    "name_format_problem",
    "parse_skill_dir",
    "parse_skill_text",
    "parse_skill_tree",
    "skill_digest",
    "split_tool_rules",
    "walk_skill_tree",
]


@dataclass(frozen=True, slots=True)
class SkillSpec:
    name: str
    description: str
    body: str
    path: Path
    skill_file: Path
    source: str
    digest: str
    frontmatter: Mapping[str, Any]
    when_to_use: str | None
    argument_hint: str | None
    arguments: tuple[str, ...]
    disable_model_invocation: bool
    user_invocable: bool
    allowed_tools: tuple[str, ...]
    disallowed_tools: tuple[str, ...]
    model: str | None
    effort: str | None
    context: str | None
    agent: str | None
    hooks: Mapping[str, Any]
    paths: tuple[str, ...]
    version: str | None
    mode: bool
    license: str | None
    compatibility: str | None
    metadata: Mapping[str, Any]
    problems: tuple[Problem, ...]

    @property
    def model_invocable(self) -> bool:
        """True unless `disable-model-invocation` is set."""
        return not self.disable_model_invocation

    @property
    def has_description(self) -> bool:
        """True when the frontmatter gives a description (not the body's first paragraph)."""
        value = self.frontmatter.get("description")
        return value is not None and not (isinstance(value, str) and not value.strip())

    @property
    def plugin(self) -> str | None:
        """The plugin a skill comes from (`plugin:name` skills), or None."""
        plugin, sep, _rest = self.name.partition(":")
        return plugin if sep and plugin else None

    @property
    def errors(self) -> list[Problem]:
        """Problems with severity "error"."""
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        """Problems with severity "warning"."""
        return [p for p in self.problems if p.severity == "warning"]


def parse_skill_dir(directory: Path, *, name: str | None = None, source: str = "dirs") -> SkillSpec:
    """Parse the skill in `directory`; raises SkillFileError when it cannot be read."""
    directory = Path(directory).absolute()
    if not directory.is_dir():
        raise SkillFileError(
            Problem(
                "error",
                "missing-skill-file",
                f"{directory} is not a folder; point at the skill's folder",
                str(directory),
            )
        )
    return parse_skill_tree(directory, walk_skill_tree(directory), name=name, source=source)


def parse_skill_tree(
    directory: Path, entries: list[TreeEntry], *, name: str | None = None, source: str = "dirs"
) -> SkillSpec:
    """Parse a skill from an already-walked tree, reading every file once (digest + SKILL.md)."""
    files = sorted((e for e in entries if not e.is_dir), key=lambda e: e.rel)
    top = {e.rel: e for e in files if "/" not in e.rel and e.rel.lower() == "skill.md"}
    chosen = top.get("SKILL.md") or (top[sorted(top)[0]] if top else None)
    if chosen is None:
        msg = f"{directory} has no SKILL.md; add one with a `description:` in YAML frontmatter"
        raise SkillFileError(Problem("error", "missing-skill-file", msg, str(directory)))
    h = hashlib.sha256()
    raw = b""
    for entry in files:
        data = _read(entry.path)
        digest_update(h, entry.rel, data)
        if entry is chosen:
            raw = data
    skill_file = Path(chosen.path)
    text = _decode(raw, skill_file)
    return _build(text, directory, name or directory.name, source, skill_file, h.hexdigest())


def parse_skill_text(
    text: str,
    *,
    directory: Path,
    name: str,
    source: str = "dirs",
    skill_file: Path | None = None,
    digest: str | None = None,
) -> SkillSpec:
    """Parse SKILL.md text for a skill living in `directory` (digest from the folder if it exists)."""
    directory = Path(directory)
    skill_file = skill_file or directory / "SKILL.md"
    if digest is None:
        if directory.is_dir() and find_skill_file(directory):
            digest = skill_digest(directory)
        else:
            h = hashlib.sha256()
            digest_update(h, skill_file.name, text.encode("utf-8"))
            digest = h.hexdigest()
    return _build(frontmatter.normalise(text), directory, name, source, skill_file, digest)


def lint_skill_dir(directory: Path) -> list[Problem]:
    """Every problem of the skill in `directory`, errors and warnings; never raises."""
    try:
        return list(parse_skill_dir(Path(directory)).problems)
    except SkillFileError as exc:
        return [exc.problem]
    except OSError as exc:
        return [
            Problem(
                "error",
                "unreadable",
                f"cannot read the skill: {exc}; check permissions",
                str(directory),
            )
        ]


# --- parsing -------------------------------------------------------------------------------


def _decode(data: bytes, file: Path) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        msg = f"{file.name} is not UTF-8 (bad byte at offset {exc.start}, line {line}); re-save it as UTF-8"
        raise SkillFileError(Problem("error", "encoding", msg, str(file), line)) from None
    return frontmatter.normalise(text)


def split_tool_rules(value: str) -> list[str]:
    """Split an allowed-tools string on spaces/commas that are outside parentheses."""
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in value:
        if ch == "(":
            depth += 1
        elif ch == ")" and depth:
            depth -= 1
        if depth == 0 and (ch.isspace() or ch == ","):
            if cur:
                out.append("".join(cur))
                cur = []
            continue
        cur.append(ch)
    if cur:
        out.append("".join(cur))
    return out


def _split_words(value: str) -> list[str]:
    return [w for w in re.split(r"[\s,]+", value) if w]


def _split_commas(value: str) -> list[str]:
    return [w.strip() for w in value.split(",") if w.strip()]


def _build(
    text: str, directory: Path, name: str, source: str, skill_file: Path, digest: str
) -> SkillSpec:
    probs: list[Problem] = []
    yaml_text, rest, body_line = frontmatter.split(text, skill_file, probs)
    fm = frontmatter.load(yaml_text, skill_file, probs)
    if body_line == 1 and not text.startswith("---"):
        msg = (
            "SKILL.md has no frontmatter; Claude Code loads it with the folder's name and the "
            "body's first paragraph, but the Agent Skills spec requires one. Start the file "
            "with a --- line, `name:` and `description:`, and a closing ---"
        )
        probs.append(Problem("warning", "frontmatter-missing", msg, str(skill_file), 1))
    body = rest.lstrip("\n")
    body_line += len(rest) - len(body)
    f = Fields(fm, yaml_text, skill_file, probs)

    check_keys(fm, f)
    check_name(name, f)
    description = description_of(fm, body, f)

    compatibility = f.text("compatibility")
    if compatibility is not None and len(compatibility) > MAX_COMPATIBILITY:
        msg = f"compatibility is {len(compatibility)} characters (limit {MAX_COMPATIBILITY}); shorten it"
        f.problem("error", "compatibility-length", "compatibility", msg)
    model = f.text("model")
    if model is not None and model.strip().lower() == "inherit":
        model = None
    effort = f.text("effort")
    if effort is not None and effort not in EFFORTS:
        f.problem(
            "warning",
            "effort-value",
            "effort",
            f"effort {effort!r} is ignored; use one of {', '.join(sorted(EFFORTS))}",
        )
        effort = None
    context = f.text("context")
    if context is not None and context != "fork":
        f.problem(
            "warning",
            "context-value",
            "context",
            f"context {context!r} is ignored; the only value is `fork`",
        )
        context = None

    fields: dict[str, Any] = {
        "name": name,
        "description": description,
        "body": body,
        "path": directory,
        "skill_file": skill_file,
        "source": source,
        "digest": digest,
        "frontmatter": fm,
        "when_to_use": f.text("when_to_use"),
        "argument_hint": f.text("argument-hint"),
        "arguments": f.items("arguments", _split_words),
        "disable_model_invocation": f.flag("disable-model-invocation", False),
        "user_invocable": f.flag("user-invocable", True),
        "allowed_tools": f.items("allowed-tools", split_tool_rules),
        "disallowed_tools": f.items("disallowed-tools", split_tool_rules),
        "model": model,
        "effort": effort,
        "context": context,
        "agent": f.text("agent"),
        "hooks": f.mapping("hooks"),
        "paths": f.items("paths", _split_commas),
        "version": f.text("version"),
        "mode": f.flag("mode", False),
        "license": f.text("license"),
        "compatibility": compatibility,
        "metadata": f.mapping("metadata"),
    }
    f.flag("background", True)  # only validated: nothing here runs forked skills in the background
    lint_body(body, body_line, directory, str(skill_file), probs)
    return SkillSpec(**fields, problems=tuple(probs))
