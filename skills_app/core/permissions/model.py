"""The values of the permission engine: rules, calls, contexts, decisions, and their words.

Semantics follow Claude Code's permission rules: deny, then ask, then allow; the first match
wins and specificity does not matter. Parsing lives in `rules`, deciding in `decide` (Bash in
`bash`, which reads commands with the tree-sitter parser in `shell`), the pure text matchers
(globs, paths, domains) in `core.rulematch`.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..rulematch import norm_path

BEHAVIORS = ("allow", "ask", "deny")
SOURCES = ("admin", "skill", "review", "conversation", "default")
KNOWN_TOOLS = (
    "Read",
    "Write",
    "Edit",
    "Glob",
    "Grep",
    "Bash",
    "Skill",
    "Task",
    "Agent",
    "WebFetch",
    "WebSearch",
    "NotebookEdit",
    "TodoWrite",
    "load_skill",
    "skill_load",
    "skill_select_docs",
    "skill_run",
)
DEFAULTS: Mapping[str, str] = MappingProxyType(
    {
        "Read": "allow",
        "Glob": "allow",
        "Grep": "allow",
        "Write": "ask",
        "Edit": "ask",
        "Bash": "ask",
    }
    # The tool-result profile's load_skill has no approval in its design (seed 001), nor the
    # skill toolset's skill_load (seed 004; checked as skill_load only "as the source design",
    # as Skill otherwise): allow unless an admin's Skill(...) deny or ask rule says otherwise.
    | {"Skill": "ask", "load_skill": "allow", "skill_load": "allow", "*": "ask"}
)

READ_TOOLS = ("Read", "Glob", "Grep")
EDIT_TOOLS = ("Edit", "Write")
SKILL_LOADERS = ("load_skill", "skill_load")  # other delivery profiles; checked as Skill(NAME)
NO_PATH_SPECIFIER = {"Write": "Edit", "Glob": "Read", "Grep": "Read"}
# Which input field a plain specifier is matched against for tools without their own syntax.
PRIMARY_FIELD = {
    "Task": "subagent_type",
    "Agent": "subagent_type",
    "WebSearch": "query",
    "NotebookEdit": "notebook_path",
    "skill_select_docs": "skill",
    "skill_run": "command",
}
MCP_PART = re.compile(r"[A-Za-z0-9_-]+")


class RuleSyntaxError(ValueError):
    """A permission rule or call text that cannot be parsed."""


@dataclass(frozen=True, slots=True)
class Rule:
    behavior: str
    tool: str
    specifier: str | None
    text: str
    source: str = "admin"
    rule_id: int | None = None
    scope_skill: str | None = None
    note: str = ""


@dataclass(frozen=True, slots=True)
class ToolCall:
    tool: str
    input: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class McpHints:
    """What the serving definition of one MCP tool says of itself (readOnlyHint, destructiveHint:
    None when it says nothing), and who attested it ("": nobody, so the hints are only the
    server's claim and decide nothing). An attestation holds for the definition it was given
    with: the app passes it only while the server still lists that very definition."""

    read_only: bool | None = None
    destructive: bool | None = None
    attested_by: str = ""

    def words(self) -> str:
        """The hints in words ("" when there are none), attested or only claimed."""
        said = [
            name
            for name, value in (("read-only", self.read_only), ("destructive", self.destructive))
            if value
        ]
        if not said:
            return ""
        if not self.attested_by:
            return ", ".join(f"{name}: claimed by the server, not attested" for name in said)
        if self.destructive:
            return f"destructive (attested by {self.attested_by})"
        return f"read-only attested by {self.attested_by}"


@dataclass(frozen=True, slots=True)
class PermissionContext:
    workspace: Path
    admin_rules: Sequence[Rule] = ()
    active_skills: Sequence[str] = ()
    skill_rules: Sequence[Rule] = ()
    grants: Sequence[Rule] = ()
    readable_roots: Sequence[Path] = ()
    defaults: Mapping[str, str] = field(default_factory=lambda: DEFAULTS)
    # The folders (under a readable root) of the skills this conversation may use; a copy
    # staged there for a skill no longer offered (its group dropped the person, it was
    # disabled) is not readable. None: not known (every staged copy is readable).
    offered_skill_folders: frozenset[str] | None = None
    # The hints of each offered MCP tool (`mcp__server__tool`), attested or not: an attested
    # readOnlyHint makes the default of a call no rule names allow, an attested destructiveHint
    # keeps it asking; unattested ones only show in the reason.
    mcp_hints: Mapping[str, McpHints] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Decision:
    behavior: str
    reason: str
    rule: Rule | None
    # The approval that answered an "ask" (set by the services), else None.
    approval_id: int | None = None
    # An "ask" because the write steers a program (`steering`): no broad rule covers it.
    protected: bool = False


def str_field(mapping: Mapping[str, Any], *keys: str) -> str:
    for key in keys:
        value = mapping.get(key)
        if isinstance(value, str):
            return value
    return ""


def target_path(call: ToolCall, workspace: str) -> str:
    """The absolute, normalised path a Read/Edit/Write/Glob/Grep call touches."""
    raw = str_field(call.input, "file_path", "path", "notebook_path")
    if call.tool == "Glob":
        pattern = str_field(call.input, "pattern")
        wild = re.search(r"[*?\[]", pattern)
        if wild:
            # the search root is the pattern's literal leading directories
            prefix = pattern[: wild.start()]
            pattern = prefix.rsplit("/", 1)[0] + "/" if "/" in prefix else ""
        raw = posixpath.join(raw or ".", pattern)
    return norm_path(posixpath.join(workspace, raw or "."))


def skill_subjects(call: ToolCall) -> list[str]:
    name = str_field(call.input, "skill", "command", "name").strip().lstrip("/")
    args = str_field(call.input, "args").strip()
    return [name, f"{name} {args}"] if args else [name]


def describe(rule: Rule) -> str:
    """Name the rule that decided, for the approval prompt and the audit row."""
    if rule.source == "skill":
        kind = {"allow": "allowed-tools", "deny": "disallowed-tools"}.get(rule.behavior, "rules")
        who = f'skill "{rule.scope_skill}"' if rule.scope_skill else "the active skill"
        return f"{kind} of {who}: {rule.text}"
    if rule.source == "review":
        # The reviewer consented to it: the note names the review ("the review of x v2 by mona").
        return f"allowed by {rule.note or 'a review'}: {rule.text}"
    if rule.source == "conversation":
        verb = "allowed" if rule.behavior == "allow" else rule.behavior
        return f"{verb} for this conversation: {rule.text}"
    origin = rule.source + (f" #{rule.rule_id}" if rule.rule_id is not None else "")
    if rule.scope_skill:
        origin += f', skill "{rule.scope_skill}" only'
    return f'{rule.behavior} rule "{rule.text}" ({origin})'
