"""Rule text: parse `Tool(specifier)` rules, grants for "allow for this conversation", call text.

In Bash and Skill specifiers `\\*` is a literal star, so a conversation grant can name one exact
command.
"""

from __future__ import annotations

import difflib
import posixpath
import re
from typing import Any

from ..rulematch import domain_of, escape_stars, glob_escape, glob_regex, norm_path
from .model import (
    _EDIT_TOOLS,
    _MCP_PART,
    _NO_PATH_SPECIFIER,
    _PRIMARY_FIELD,
    _READ_TOOLS,
    _SKILL_LOADERS,
    BEHAVIORS,
    KNOWN_TOOLS,
    SOURCES,
    Rule,
    RuleSyntaxError,
    ToolCall,
    skill_subjects,
    str_field,
    target_path,
)


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
        command = str_field(call.input, "command").strip()
        if not command:
            raise RuleSyntaxError("Cannot grant an empty Bash command; ask again with the command.")
        spec = escape_stars(command)
    elif tool == "Skill" or tool in _SKILL_LOADERS:
        name = skill_subjects(call)[0]
        if not name:
            raise RuleSyntaxError("Cannot grant a Skill call without a skill name.")
        tool, spec = "Skill", escape_stars(name)
    elif tool in _READ_TOOLS + _EDIT_TOOLS:
        spec = _rule_path(target_path(call, "."), escape=True)
        tool = "Read" if tool in _READ_TOOLS else "Edit"
    elif tool == "WebFetch":
        host = domain_of(str_field(call.input, "url"))
        if not host:
            raise RuleSyntaxError("Cannot grant a WebFetch call without a URL host.")
        spec = f"domain:{host}"
    text = f"{tool}({spec})" if spec else tool
    return Rule("allow", tool, spec, text, "conversation")


def call_as_rule_text(call: ToolCall) -> str:
    """Show a call in rule syntax, e.g. `Bash(git push origin main)` or `Edit(./out/report.md)`."""
    tool, data = call.tool, call.input
    if tool == "Bash":
        spec = str_field(data, "command")
    elif tool == "Skill" or tool in _SKILL_LOADERS:
        # Skill names hold no whitespace, so any run of it reads back as one separator.
        spec = " ".join(skill_subjects(call)[-1].split())
    elif tool in ("Read", "Edit", "Write"):
        path = str_field(data, "file_path", "path")
        spec = _rule_path(path) if path else ""
    elif tool == "Glob":
        pattern, path = str_field(data, "pattern"), str_field(data, "path")
        spec = posixpath.join(path, pattern) if path else pattern
    elif tool == "Grep":
        spec = str_field(data, "pattern")
    elif tool == "WebFetch":
        spec = str_field(data, "url")
    else:
        spec = str_field(data, _PRIMARY_FIELD.get(tool, "input"))
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
