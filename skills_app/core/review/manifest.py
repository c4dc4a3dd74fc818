"""The command manifest of a skill version: the tools and commands it will use, for review.

Entries, each shown exactly as written, where it was found, and in plain words:

- `allowed-tool`: each `allowed-tools` rule of the frontmatter;
- `command`: each command the body (or a document it points at) asks the model to run
  (`commands.find_commands`: fenced shell blocks, inline code that reads as a command);
- `context-command`: each `!` dynamic-context command (run before the body is delivered);
- `hook`: each command of the skill's `hooks`;
- `mcp-tool`: each MCP tool (`mcp__server__tool`) the body or a document it points at names
  that no `allowed-tools` entry covers. Never consented: the model picks its arguments, so
  each call is decided by the rules and the person; an MCP tool the skill lists in
  `allowed-tools` is an `allowed-tool` entry, which the review covers like any other.

`consent` says whether approving the manifest lets matching calls run without asking the user.
It is False, with the reason in `note`, for an entry that would consent to something other than
what the reviewer saw: a rule that does not parse, a command that names one of the skill's
files by a path relative to the workspace (it would run whatever is at that path there), a
command that names a path in the skill's folder the review could not show as text (a binary,
or a file the version does not have), a command the text says not to run, or one whose
arguments could not be kept in their slots.

The manifest is data: `as_data()` is what a review stores, and `digest` binds an approval to
exactly the entries the reviewer saw.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import PurePosixPath
from typing import Any

from ..dynamic import find_placeholders
from ..permissions import Rule, RuleSyntaxError, parse_rule
from ..permissions.decide import covers
from ..permissions.rules import mcp_parts
from ..skillfile import SkillSpec
from ..skillhooks import parse_skill_hooks
from .commands import find_commands, named_skill_files, relative_skill_paths
from .package import DOC_SUFFIXES, PackageFile, shown_to_reviewer, unseen
from .template import compile_template, placeholder_pattern
from .words import breadth_warning, explain_command, explain_mcp, explain_rule, mcp_breadth

KINDS = ("allowed-tool", "command", "context-command", "hook", "mcp-tool")
KIND_WORDS = {
    "allowed-tool": "allowed-tools rule",
    "mcp-tool": "MCP tool the text names",
    "command": "command the skill asks the model to run",
    "context-command": "`!` command run while the skill loads",
    "hook": "hook command",
}
# `<short-name>` in a documented command: a blank the model fills in, not shell syntax.
_DOC_PLACEHOLDER = re.compile(r"<[A-Za-z][\w .:/-]*>")
# Checks the consent of a command-like entry against; any real folder name works.
_PROBE_DIR = "/skill-dir"
# An MCP tool's name in a text: mcp__server__tool (the rules' name parts).
_MCP_NAME = re.compile(r"(?<![A-Za-z0-9_-])mcp__[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*__[A-Za-z0-9_-]+")


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    """One tool or command of the manifest."""

    kind: str
    tool: str
    text: str  # exactly as written
    where: str  # "SKILL.md:12", "SKILL.md (frontmatter)", "references/run.md:4"
    words: str  # in plain words
    consent: bool  # approving the manifest consents to calls it covers
    note: str = ""  # why it is not consented to, or what to be careful about
    arguments: bool = False  # the command takes the arguments typed after the skill's name

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ManifestEntry:
        """An entry from its stored form (unknown keys ignored)."""
        return cls(
            kind=str(data.get("kind", "")),
            tool=str(data.get("tool", "")),
            text=str(data.get("text", "")),
            where=str(data.get("where", "")),
            words=str(data.get("words", "")),
            consent=bool(data.get("consent", False)),
            note=str(data.get("note", "")),
            arguments=bool(data.get("arguments", False)),
        )

    @property
    def kind_words(self) -> str:
        return KIND_WORDS.get(self.kind, self.kind)


@dataclass(frozen=True, slots=True)
class Manifest:
    entries: tuple[ManifestEntry, ...]

    def as_data(self) -> list[dict[str, Any]]:
        return [e.as_dict() for e in self.entries]

    @classmethod
    def from_data(cls, data: Any) -> Manifest:
        """A manifest from its stored form; anything that is not a list of entries is empty."""
        items = data if isinstance(data, list) else []
        return cls(tuple(ManifestEntry.from_dict(d) for d in items if isinstance(d, dict)))

    @property
    def digest(self) -> str:
        """sha256 of the entries: an approval names the exact manifest the reviewer saw."""
        text = json.dumps(self.as_data(), sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def __len__(self) -> int:
        return len(self.entries)


def _line_of(text: str, offset: int, first_line: int = 1) -> int:
    return first_line + text.count("\n", 0, max(offset, 0))


def entry_paths(entry: ManifestEntry) -> list[str]:
    """The paths in the skill's folder an entry names (a Bash rule's pattern, or a command)."""
    if entry.kind != "allowed-tool":
        return named_skill_files(entry.text)
    if entry.tool != "Bash":
        return []
    try:
        rule = parse_rule(entry.text, "allow", source="skill")
    except RuleSyntaxError:
        return []
    return named_skill_files(rule.specifier or "")


def _rule_entry(text: str, shown: Mapping[str, bool]) -> ManifestEntry:
    files = frozenset(shown)
    where = "SKILL.md (frontmatter)"
    try:
        rule = parse_rule(text, "allow", source="skill")
    except RuleSyntaxError as exc:
        return ManifestEntry(
            "allowed-tool", "?", text, where, explain_rule(text), False, f"not a rule: {exc}"
        )
    note = ""
    consent = True
    if rule.tool == "Bash":
        relative = relative_skill_paths((rule.specifier or "").replace("*", " "), files)
        if relative:
            consent = False
            note = _relative_note(relative)
        elif hidden := unseen(named_skill_files(rule.specifier or ""), shown):
            consent, note = False, _unseen_note(hidden)
        elif breadth := breadth_warning(rule.specifier):
            note = f"Careful: {breadth}."
    elif (parts := mcp_parts(rule.tool)) is not None and (breadth := mcp_breadth(parts[1])):
        note = f"Careful: {breadth}."
    return ManifestEntry("allowed-tool", rule.tool, text, where, explain_rule(text), consent, note)


def _relative_note(paths: Sequence[str]) -> str:
    shown = ", ".join(f"`{p}`" for p in paths[:3])
    return (
        f"Not consented: it names {shown} relative to the workspace, where commands run, so it "
        "would run whatever is at that path there, not the reviewed file. Write "
        "`${CLAUDE_SKILL_DIR}/...` instead."
    )


def _unseen_note(paths: Sequence[str]) -> str:
    shown = ", ".join(f"`{p}`" for p in paths[:3])
    return (
        f"Not consented: it names {shown} in the skill's folder, which the review could not "
        "show as text (a binary, listed by its size and digest only, or not a file of this "
        "version), so nobody read what it would run."
    )


def _command_entry(
    kind: str, text: str, where: str, shown: Mapping[str, bool], names: Sequence[str]
) -> ManifestEntry:
    takes_args = bool(placeholder_pattern(names).search(text))
    consent, note = True, ""
    relative = relative_skill_paths(text, frozenset(shown))
    blank = _DOC_PLACEHOLDER.search(text)
    words = explain_command(_DOC_PLACEHOLDER.sub("NAME", text))
    if blank:
        consent = False
        note = (
            f"Not consented: `{blank[0]}` is a blank the model fills in, so the command it runs "
            "is not this text; the rules and the user decide."
        )
    elif relative:
        consent, note = False, _relative_note(relative)
    elif hidden := unseen(named_skill_files(text), shown):
        consent, note = False, _unseen_note(hidden)
    elif takes_args:
        template = compile_template(text, skill_dir=_PROBE_DIR, names=names)
        if isinstance(template, str):
            consent = False
            note = f"Not consented: {template}, so the arguments could change what it runs."
    return ManifestEntry(kind, "Bash", text, where, words, consent, note, takes_args)


def _mcp_entries(text: str, rel: str, first: int, rules: Sequence[Rule]) -> list[ManifestEntry]:
    """The MCP tools `text` names that no allowed-tools rule covers, each once, not consented."""
    found: list[ManifestEntry] = []
    for match in _MCP_NAME.finditer(text):
        name = match.group()
        parts = mcp_parts(name)
        if parts is None or any(covers(r, name) for r in rules):
            continue
        where = f"{rel}:{_line_of(text, match.start(), first)}"
        note = (
            "Not consented: the skill names it in its text but not in allowed-tools, so each "
            "call is decided by the rules and the person. List it in allowed-tools for a review "
            "to cover it."
        )
        found.append(
            ManifestEntry("mcp-tool", name, name, where, explain_mcp(*parts) + ".", False, note)
        )
    return found


def _documents(files: Iterable[PackageFile], body: str, skill_file: str) -> list[PackageFile]:
    """The text documents the body points at by path (one level: what the model is sent to read)."""
    return [
        f
        for f in files
        if f.text is not None
        and f.rel != skill_file
        and PurePosixPath(f.rel).suffix.lower() in DOC_SUFFIXES
        and f.rel in body
    ]


def build_manifest(spec: SkillSpec, files: Sequence[PackageFile]) -> Manifest:
    """The manifest of a parsed skill whose files are `files` (see the module docstring)."""
    shown = shown_to_reviewer(files)
    skill_file = spec.skill_file.name
    source = next((f.text for f in files if f.rel == skill_file), None) or ""
    body_at = source.find(spec.body) if spec.body else -1
    first = _line_of(source, body_at) if body_at >= 0 else 1
    entries: dict[tuple[str, str], ManifestEntry] = {}

    def add(entry: ManifestEntry) -> None:
        entries.setdefault((entry.kind, entry.text), entry)

    for text in spec.allowed_tools:
        add(_rule_entry(text, shown))
    for p in find_placeholders(spec.body):
        where = f"{skill_file}:{_line_of(spec.body, p.start, first)}"
        add(_command_entry("context-command", p.command, where, shown, spec.arguments))
    hooks, _notes = parse_skill_hooks(spec.name, spec.hooks)
    for hook in hooks:
        on = f"{hook.event}" + (f" of {hook.matcher}" if hook.matcher not in ("", "*") else "")
        entry = _command_entry("hook", hook.command, "SKILL.md (frontmatter)", shown, ())
        add(
            ManifestEntry(
                entry.kind,
                entry.tool,
                entry.text,
                entry.where,
                f"{entry.words} It runs on every {on} event for the rest of the conversation.",
                entry.consent,
                entry.note,
            )
        )
    sources = [(skill_file, spec.body, first)]
    sources += [(d.rel, d.text or "", 1) for d in _documents(files, spec.body, skill_file)]
    granted: list[Rule] = []
    for text in spec.allowed_tools:
        try:
            granted.append(parse_rule(text, "allow", source="skill"))
        except RuleSyntaxError:
            continue
    for rel, text, line in sources:
        for mcp_entry in _mcp_entries(text, rel, line, granted):
            add(mcp_entry)
        for found in find_commands(text, first_line=line):
            entry = _command_entry(
                "command", found.text, f"{rel}:{found.line}", shown, spec.arguments
            )
            if found.negated:
                entry = ManifestEntry(
                    entry.kind,
                    entry.tool,
                    entry.text,
                    entry.where,
                    entry.words,
                    False,
                    "Not consented: the text tells the model not to run it.",
                    entry.arguments,
                )
            add(entry)
    return Manifest(tuple(entries.values()))


__all__ = ["KINDS", "KIND_WORDS", "Manifest", "ManifestEntry", "build_manifest", "entry_paths"]
