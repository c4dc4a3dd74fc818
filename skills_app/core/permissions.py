"""Permission rules: parse `Tool(specifier)` rule text and decide allow / ask / deny for a tool call.

Semantics follow Claude Code's permission rules: deny, then ask, then allow; the first match
wins and specificity does not matter. Bash wrappers stripped before matching: `timeout [opts] N`,
`nice [-n N]`, `nohup`, `time [-p]` and bare `xargs`; `VAR=x` prefixes and `env` are NOT
stripped (they can change what a command does). In Bash and Skill specifiers `\\*` is a
literal star, so a conversation grant can name one exact command. The pure text matchers
(shell splitting, globs, paths, domains) live in `rulematch`.
"""

from __future__ import annotations

import difflib
import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .rulematch import (
    bash_subjects,
    command_regex,
    domain_matches,
    domain_of,
    escape_stars,
    glob_escape,
    glob_regex,
    is_inside,
    literal_text,
    norm_path,
    path_matches,
    split_shell,
    strip_wrappers,
)

BEHAVIORS = ("allow", "ask", "deny")
SOURCES = ("admin", "skill", "conversation", "default")
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
    | {"Skill": "ask", "*": "ask"}
)

_READ_TOOLS = ("Read", "Glob", "Grep")
_EDIT_TOOLS = ("Edit", "Write")
_SKILL_LOADERS = ("load_skill", "skill_load")  # other delivery profiles; checked as Skill(NAME)
_NO_PATH_SPECIFIER = {"Write": "Edit", "Glob": "Read", "Grep": "Read"}
# Which input field a plain specifier is matched against for tools without their own syntax.
_PRIMARY_FIELD = {
    "Task": "subagent_type",
    "Agent": "subagent_type",
    "WebSearch": "query",
    "NotebookEdit": "notebook_path",
    "skill_select_docs": "skill",
    "skill_run": "command",
}
_MCP_PART = re.compile(r"[A-Za-z0-9_-]+")


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
class PermissionContext:
    workspace: Path
    admin_rules: Sequence[Rule] = ()
    active_skills: Sequence[str] = ()
    skill_rules: Sequence[Rule] = ()
    grants: Sequence[Rule] = ()
    readable_roots: Sequence[Path] = ()
    defaults: Mapping[str, str] = field(default_factory=lambda: DEFAULTS)


@dataclass(frozen=True, slots=True)
class Decision:
    behavior: str
    reason: str
    rule: Rule | None
    # The approval that answered an "ask" (set by the services), else None.
    approval_id: int | None = None


# ---------------------------------------------------------------- parsing


def _split_text(text: str) -> tuple[str, str | None]:
    """Split `Tool(spec)` into tool and raw specifier, checking the outer parentheses only."""
    stripped = text.strip()
    if not stripped:
        raise RuleSyntaxError("Empty rule: write a tool name such as Bash or Bash(git diff *).")
    open_at = stripped.find("(")
    close_at = stripped.rfind(")")
    if open_at == -1:
        if close_at != -1:
            raise RuleSyntaxError(f"Unbalanced parentheses in {stripped!r}: ')' without '('.")
        return stripped, None
    tool = stripped[:open_at].strip()
    if not tool:
        raise RuleSyntaxError(f"Missing tool name before '(' in {stripped!r}, e.g. Bash(ls *).")
    if close_at < open_at:
        raise RuleSyntaxError(f"Unbalanced parentheses in {stripped!r}: add the closing ')'.")
    if close_at != len(stripped) - 1:
        raise RuleSyntaxError(
            f"Text after ')' in {stripped!r}: {stripped[close_at + 1 :]!r}; "
            "the specifier must be the last part of the rule."
        )
    return tool, stripped[open_at + 1 : close_at]


def _check_balanced(spec: str, shell: bool) -> None:
    """Reject specifiers whose parentheses do not pair up (quote-aware for shell text)."""
    depth, quote, i = 0, "", 0
    while i < len(spec):
        ch = spec[i]
        if quote == "'":
            quote = "" if ch == "'" else quote
        elif shell and ch == "\\":
            i += 1  # the escaped character never counts
        elif quote == '"':
            quote = "" if ch == '"' else quote
        elif shell and ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise RuleSyntaxError(
                    f"Unbalanced parentheses in specifier {spec!r}: a ')' closes the rule early; "
                    "remove it or add the matching '('."
                )
        i += 1
    if depth:
        raise RuleSyntaxError(f"Unbalanced parentheses in specifier {spec!r}: add the missing ')'.")


def _check_tool(tool: str) -> None:
    if tool in KNOWN_TOOLS:
        return
    if tool.startswith("mcp__"):
        server, sep, name = tool[5:].partition("__")
        if _MCP_PART.fullmatch(server) and (not sep or name == "*" or _MCP_PART.fullmatch(name)):
            return
        raise RuleSyntaxError(
            f"Malformed MCP tool name {tool!r}: use mcp__server, mcp__server__* or mcp__server__tool."
        )
    hint = [t for t in KNOWN_TOOLS if t.lower() == tool.lower()] or difflib.get_close_matches(
        tool, KNOWN_TOOLS, n=1
    )
    suggestion = f" Did you mean {hint[0]}?" if hint else ""
    raise RuleSyntaxError(
        f"Unknown tool {tool!r}.{suggestion} Known tools: {', '.join(KNOWN_TOOLS)}, "
        "or an MCP tool such as mcp__server__tool."
    )


def _normalise_specifier(tool: str, spec: str) -> str | None:
    spec = spec.strip()
    if tool == "Bash" and spec.endswith(":*"):
        spec = spec[:-2].rstrip() + " *"  # legacy prefix syntax, only at the end
        spec = spec.strip()
    if spec == "*":
        return None  # Tool(*) is the bare tool rule
    if not spec:
        raise RuleSyntaxError(
            f"Empty specifier in {tool}(): write the bare tool name {tool} to match every call."
        )
    if tool.startswith("mcp__"):
        raise RuleSyntaxError(f"MCP rules take no specifier: write {tool} on its own.")
    if tool in _NO_PATH_SPECIFIER:
        other = _NO_PATH_SPECIFIER[tool]
        raise RuleSyntaxError(
            f"{tool}(...) rules are never consulted: write {other}({spec}) for paths "
            f"(it covers {tool}), or the bare tool name {tool}."
        )
    if tool in ("Read", "Edit"):
        if spec.startswith("~"):
            raise RuleSyntaxError(
                f"Home-relative path {spec!r} is not supported: use //absolute/path or ./relative."
            )
        try:
            re.compile(glob_regex(spec))
        except re.error as exc:
            raise RuleSyntaxError(f"Invalid path pattern {spec!r}: {exc}.") from None
    if tool == "WebFetch":
        domain = spec.removeprefix("domain:")
        if domain == spec or not domain or any(c in domain for c in " /"):
            raise RuleSyntaxError(
                f"WebFetch rules take a domain: write WebFetch(domain:example.com), not {spec!r}."
            )
    return spec


def parse_rule(
    text: str,
    behavior: str = "allow",
    *,
    source: str = "admin",
    rule_id: int | None = None,
    scope_skill: str | None = None,
    note: str = "",
) -> Rule:
    """Parse rule text such as `Bash(git diff *)` into a normalised Rule."""
    if not isinstance(text, str):
        raise RuleSyntaxError(f"Rule text must be a string, not {type(text).__name__}.")
    if behavior not in BEHAVIORS:
        raise RuleSyntaxError(f"Unknown behavior {behavior!r}: use one of {', '.join(BEHAVIORS)}.")
    if source not in SOURCES:
        raise RuleSyntaxError(f"Unknown rule source {source!r}: use one of {', '.join(SOURCES)}.")
    tool, raw = _split_text(text)
    _check_tool(tool)
    spec: str | None = None
    if raw is not None:
        # Grants hold one exact command, which may legitimately be unbalanced (e.g. `case`).
        if source != "conversation":
            _check_balanced(raw, shell=tool in ("Bash", "Skill"))
        spec = _normalise_specifier(tool, raw)
    normalised = tool if spec is None else f"{tool}({spec})"
    return Rule(behavior, tool, spec, normalised, source, rule_id, scope_skill, note)


# ---------------------------------------------------------------- matching helpers


def _str(mapping: Mapping[str, Any], *keys: str) -> str:
    for key in keys:
        value = mapping.get(key)
        if isinstance(value, str):
            return value
    return ""


def _target_path(call: ToolCall, workspace: str) -> str:
    """The absolute, normalised path a Read/Edit/Write/Glob/Grep call touches."""
    raw = _str(call.input, "file_path", "path", "notebook_path")
    if call.tool == "Glob":
        pattern = _str(call.input, "pattern")
        wild = re.search(r"[*?\[]", pattern)
        if wild:
            # the search root is the pattern's literal leading directories
            prefix = pattern[: wild.start()]
            pattern = prefix.rsplit("/", 1)[0] + "/" if "/" in prefix else ""
        raw = posixpath.join(raw or ".", pattern)
    return norm_path(posixpath.join(workspace, raw or "."))


def _skill_subjects(call: ToolCall) -> list[str]:
    name = _str(call.input, "skill", "command", "name").strip().lstrip("/")
    args = _str(call.input, "args").strip()
    return [name, f"{name} {args}"] if args else [name]


def _covers(rule: Rule, tool: str) -> bool:
    """Whether a rule for rule.tool is consulted for a call of tool."""
    if rule.tool == tool:
        return True
    if rule.tool.startswith("mcp__") and tool.startswith("mcp__"):
        server, _, name = rule.tool[5:].partition("__")
        return name in ("", "*") and tool.startswith(f"mcp__{server}__")
    if rule.tool == "Skill":
        return tool in _SKILL_LOADERS
    if rule.tool == "Read":
        # A deny on a Read path also protects that path from Edit and Write.
        edit_deny = rule.behavior == "deny" and rule.specifier is not None
        return tool in ("Glob", "Grep") or (edit_deny and tool in _EDIT_TOOLS)
    return rule.tool == "Edit" and tool == "Write"


def _specifier_matches(rule: Rule, call: ToolCall, workspace: str, subjects: list[str]) -> bool:
    spec = rule.specifier
    if spec is None:
        return True
    if rule.tool in ("Bash", "Skill"):
        regex = command_regex(spec)
        return any(regex.fullmatch(subject) for subject in subjects)
    if rule.tool in ("Read", "Edit"):
        target = _target_path(call, workspace)
        # Glob and Grep search a directory: a rule covering its contents covers the search.
        dir_tool = call.tool in ("Glob", "Grep")
        targets = (target, posixpath.join(target, "\0")) if dir_tool else (target,)
        return any(path_matches(spec, t, workspace) for t in targets)
    if rule.tool == "WebFetch":
        return domain_matches(spec.removeprefix("domain:"), _str(call.input, "url"))
    key, sep, value = spec.partition(":")
    if sep and key.isidentifier() and key in call.input:
        return command_regex(value).fullmatch(str(call.input[key])) is not None
    primary = _PRIMARY_FIELD.get(call.tool)
    values = [call.input.get(primary)] if primary else list(call.input.values())
    regex = command_regex(spec)
    return any(isinstance(v, str) and regex.fullmatch(v) for v in values)


def _describe(rule: Rule) -> str:
    """Name the rule that decided, for the approval prompt and the audit row."""
    if rule.source == "skill":
        kind = {"allow": "allowed-tools", "deny": "disallowed-tools"}.get(rule.behavior, "rules")
        who = f'skill "{rule.scope_skill}"' if rule.scope_skill else "the active skill"
        return f"{kind} of {who}: {rule.text}"
    if rule.source == "conversation":
        verb = "allowed" if rule.behavior == "allow" else rule.behavior
        return f"{verb} for this conversation: {rule.text}"
    origin = rule.source + (f" #{rule.rule_id}" if rule.rule_id is not None else "")
    if rule.scope_skill:
        origin += f', skill "{rule.scope_skill}" only'
    return f'{rule.behavior} rule "{rule.text}" ({origin})'


def _allow_bash(command: str, allows: list[Rule]) -> Decision | None:
    """Allow only when every part of a compound command is allowed by some allow rule."""
    for rule in allows:
        if rule.specifier is None or (command and literal_text(rule.specifier) == command):
            return Decision("allow", _describe(rule), rule)
    shell = split_shell(command)
    if not shell.parts:
        return None
    used: list[Rule] = []
    for part, substituted in zip(shell.parts, shell.substituted, strict=True):
        if substituted:
            return None  # a substitution runs commands no allow rule has seen
        candidates = (part, strip_wrappers(part))
        rule = next(
            (
                r
                for r in allows
                if any(command_regex(r.specifier or "*").fullmatch(c) for c in candidates)
            ),
            None,
        )
        if rule is None:
            return None
        if rule not in used:
            used.append(rule)
    return Decision("allow", "; ".join(_describe(r) for r in used), used[0])


def _default(call: ToolCall, context: PermissionContext, workspace: str) -> Decision:
    defaults, tool = context.defaults, call.tool
    fallback = defaults.get("Skill") if tool in _SKILL_LOADERS else None
    behavior = defaults.get(tool) or fallback or defaults.get("*", "ask")
    if behavior != "deny" and tool in _READ_TOOLS + _EDIT_TOOLS:
        target = _target_path(call, workspace)
        roots = [workspace]
        if tool in _READ_TOOLS:
            roots += [norm_path(posixpath.join(workspace, str(r))) for r in context.readable_roots]
        if not any(is_inside(target, root) for root in roots):
            where = "the workspace and readable roots" if tool in _READ_TOOLS else "the workspace"
            return Decision("deny", f"default for {tool}: {target} is outside {where}", None)
    return Decision(behavior, f"default for {tool}: {behavior}", None)


def _active_rules(context: PermissionContext) -> list[Rule]:
    """Admin rules (scoped ones only while their skill is active), then skill rules, then grants."""
    admin = [
        r
        for r in context.admin_rules
        if r.scope_skill is None or r.scope_skill in context.active_skills
    ]
    return [*admin, *context.skill_rules, *context.grants]


def removed_tools(tools: Iterable[str], context: PermissionContext) -> frozenset[str]:
    """The tools a bare deny rule removes entirely, so the agent can leave them out of a request."""
    denies = [r for r in _active_rules(context) if r.behavior == "deny" and r.specifier is None]
    return frozenset(t for t in tools if any(_covers(r, t) for r in denies))


def decide(call: ToolCall, context: PermissionContext) -> Decision:
    """Decide allow / ask / deny for a tool call: deny rules, then ask, then allow, then default."""
    workspace = norm_path(str(context.workspace))
    rules = [r for r in _active_rules(context) if _covers(r, call.tool)]
    command = _str(call.input, "command").strip()
    if call.tool == "Bash":
        subjects = bash_subjects(command)
    elif call.tool == "Skill" or call.tool in _SKILL_LOADERS:
        subjects = _skill_subjects(call)
    else:
        subjects = []
    for behavior in ("deny", "ask"):
        for rule in rules:
            if rule.behavior == behavior and _specifier_matches(rule, call, workspace, subjects):
                return Decision(behavior, _describe(rule), rule)
    allows = [r for r in rules if r.behavior == "allow"]
    if call.tool == "Bash":
        allowed = _allow_bash(command, allows)
    else:
        allowed = next(
            (
                Decision("allow", _describe(r), r)
                for r in allows
                if _specifier_matches(r, call, workspace, subjects)
            ),
            None,
        )
    return allowed or _default(call, context, workspace)


# ---------------------------------------------------------------- grants and call text


def _rule_path(path: str, *, escape: bool = False) -> str:
    """A call path as rule text: `//abs/path` or `./relative/path`."""
    path = norm_path(path or ".")
    if escape:
        path = glob_escape(path)
        # rule text is stripped when parsed, so trailing whitespace goes into a character class
        path = re.sub(r"\s+$", lambda m: "".join(f"[{c}]" for c in m.group()), path)
    if path.startswith("/"):
        return "/" + path
    if path in (".", "..") or path.startswith("../"):
        return "./" if path == "." else path
    return "./" + path


def grant_rule_for(call: ToolCall) -> Rule:
    """The conversation-scoped allow rule stored when the user answers "allow for this conversation"."""
    tool, spec = call.tool, None
    if tool == "Bash":
        command = _str(call.input, "command").strip()
        if not command:
            raise RuleSyntaxError("Cannot grant an empty Bash command; ask again with the command.")
        spec = escape_stars(command)
    elif tool == "Skill" or tool in _SKILL_LOADERS:
        name = _skill_subjects(call)[0]
        if not name:
            raise RuleSyntaxError("Cannot grant a Skill call without a skill name.")
        tool, spec = "Skill", escape_stars(name)
    elif tool in _READ_TOOLS + _EDIT_TOOLS:
        spec = _rule_path(_target_path(call, "."), escape=True)
        tool = "Read" if tool in _READ_TOOLS else "Edit"
    elif tool == "WebFetch":
        host = domain_of(_str(call.input, "url"))
        if not host:
            raise RuleSyntaxError("Cannot grant a WebFetch call without a URL host.")
        spec = f"domain:{host}"
    text = f"{tool}({spec})" if spec else tool
    return Rule("allow", tool, spec, text, "conversation")


def call_as_rule_text(call: ToolCall) -> str:
    """Show a call in rule syntax, e.g. `Bash(git push origin main)` or `Edit(./out/report.md)`."""
    tool, data = call.tool, call.input
    if tool == "Bash":
        spec = _str(data, "command")
    elif tool == "Skill" or tool in _SKILL_LOADERS:
        # Skill names hold no whitespace, so any run of it reads back as one separator.
        spec = " ".join(_skill_subjects(call)[-1].split())
    elif tool in ("Read", "Edit", "Write"):
        path = _str(data, "file_path", "path")
        spec = _rule_path(path) if path else ""
    elif tool == "Glob":
        pattern, path = _str(data, "pattern"), _str(data, "path")
        spec = posixpath.join(path, pattern) if path else pattern
    elif tool == "Grep":
        spec = _str(data, "pattern")
    elif tool == "WebFetch":
        spec = _str(data, "url")
    else:
        spec = _str(data, _PRIMARY_FIELD.get(tool, "input"))
    return f"{tool}({spec})" if spec else tool


def parse_call(text: str) -> ToolCall:
    """Parse call text for the admin rule tester: `Bash(git push origin main)` -> a Bash ToolCall."""
    tool, raw = _split_text(text)
    _check_tool(tool)
    spec = (raw or "").strip()
    data: dict[str, Any]
    if tool == "Bash":
        data = {"command": spec}
    elif tool == "Skill" or tool in _SKILL_LOADERS:
        name, _, args = spec.partition(" ")
        data = {"skill" if tool == "Skill" else "name": name}
        if args.strip():
            data["args"] = args.strip()
    elif tool in ("Read", "Edit", "Write"):
        data = {"file_path": spec[1:] if spec.startswith("//") else spec}
    elif tool in ("Glob", "Grep"):
        data = {"pattern": spec}
    elif tool == "WebFetch":
        data = {"url": spec}
    else:
        data = {_PRIMARY_FIELD.get(tool, "input"): spec} if spec else {}
    return ToolCall(tool, data)
