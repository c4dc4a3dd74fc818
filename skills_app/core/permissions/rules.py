"""Rule text: parse `Tool(specifier)` rules, grants for "allow for this conversation", call text,
and which rules can never match a call Skillscope makes (`never_matches`).

In Bash and Skill specifiers `\\*` is a literal star, so a conversation grant can name one exact
command.
"""

from __future__ import annotations

import difflib
import posixpath
import re
from collections.abc import Collection, Mapping
from typing import Any

from ..rulematch import (
    domain_of,
    escape_stars,
    glob_escape,
    glob_regex,
    literal_text,
    norm_path,
)
from .model import (
    BEHAVIORS,
    EDIT_TOOLS,
    KNOWN_TOOLS,
    MCP_PART,
    NO_PATH_SPECIFIER,
    PRIMARY_FIELD,
    READ_TOOLS,
    SKILL_LOADERS,
    SOURCES,
    Rule,
    RuleSyntaxError,
    ToolCall,
    skill_subjects,
    str_field,
    target_path,
)
from .shell import analyze


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
        prefix = name[:-1] if name.endswith("*") else name
        if MCP_PART.fullmatch(server) and (not sep or name == "*" or MCP_PART.fullmatch(prefix)):
            return
        star = " (a * may only end the name)" if "*" in prefix or "*" in server else ""
        raise RuleSyntaxError(
            f"Malformed MCP tool name {tool!r}{star}: use mcp__server, mcp__server__*, "
            "mcp__server__prefix* or mcp__server__tool."
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
    if tool in NO_PATH_SPECIFIER:
        raise RuleSyntaxError(_decided_by_other(tool, spec))
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


def _decided_by_other(tool: str, spec: str) -> str:
    """Why a Write, Glob or Grep rule with a specifier is never consulted, and what to write."""
    other = NO_PATH_SPECIFIER[tool]
    what = "writes" if other == "Edit" else "searches"
    claude = ", as in Claude Code" if other == "Edit" else ""
    return (
        f"{tool}(...) rules are never consulted: {what} are decided by {other}(...) rules"
        f"{claude}; write {other}({spec}) instead, or the bare tool name {tool}."
    )


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
    elif tool == "Skill" or tool in SKILL_LOADERS:
        name = skill_subjects(call)[0]
        if not name:
            raise RuleSyntaxError("Cannot grant a Skill call without a skill name.")
        tool, spec = "Skill", escape_stars(name)
    elif tool in READ_TOOLS + EDIT_TOOLS:
        spec = _rule_path(target_path(call, "."), escape=True)
        tool = "Read" if tool in READ_TOOLS else "Edit"
    elif tool == "WebFetch":
        host = domain_of(str_field(call.input, "url"))
        if not host:
            raise RuleSyntaxError("Cannot grant a WebFetch call without a URL host.")
        spec = f"domain:{host}"
    text = f"{tool}({spec})" if spec else tool
    return Rule("allow", tool, spec, text, "conversation")


_TRAILING_SPACE = re.compile(r"\s+$")
_TRAILING_CLASSES = re.compile(r"(?:\[\s\])+$")


def _as_classes(match: re.Match[str]) -> str:
    return "".join(f"[{c}]" for c in match.group())


def call_as_rule_text(call: ToolCall) -> str:
    """Show a call in rule syntax, e.g. `Bash(git push origin main)` or `Edit(./out/report.md)`."""
    tool, data = call.tool, call.input
    if tool == "Bash":
        spec = str_field(data, "command")
    elif tool == "Skill" or tool in SKILL_LOADERS:
        # Skill names hold no whitespace, so any run of it reads back as one separator.
        spec = " ".join(skill_subjects(call)[-1].split())
    elif tool in ("Read", "Edit", "Write"):
        path = str_field(data, "file_path", "path")
        # Rule text is stripped when parsed: whitespace that ends the path is shown as the
        # character classes a grant uses (`./notes[ ]`), which parse_call reads back.
        spec = _TRAILING_SPACE.sub(_as_classes, _rule_path(path)) if path else ""
    elif tool == "Glob":
        pattern, path = str_field(data, "pattern"), str_field(data, "path")
        spec = posixpath.join(path, pattern) if path else pattern
    elif tool == "Grep":
        spec = str_field(data, "pattern")
    elif tool == "WebFetch":
        spec = str_field(data, "url")
    else:
        spec = str_field(data, PRIMARY_FIELD.get(tool, "input"))
    return f"{tool}({spec})" if spec else tool


def parse_call(text: str) -> ToolCall:
    """Parse call text for the admin rule tester: `Bash(git push origin main)` -> a Bash ToolCall."""
    tool, raw = _split_text(text)
    _check_tool(tool)
    spec = (raw or "").strip()
    data: dict[str, Any]
    if tool == "Bash":
        data = {"command": spec}
    elif tool == "Skill" or tool in SKILL_LOADERS:
        name, _, args = spec.partition(" ")
        data = {"skill" if tool == "Skill" else "name": name}
        if args.strip():
            data["args"] = args.strip()
    elif tool in ("Read", "Edit", "Write"):
        spec = _TRAILING_CLASSES.sub(lambda m: "".join(m.group()[1::3]), spec)
        data = {"file_path": spec[1:] if spec.startswith("//") else spec}
    elif tool in ("Glob", "Grep"):
        data = {"pattern": spec}
    elif tool == "WebFetch":
        data = {"url": spec}
    else:
        data = {PRIMARY_FIELD.get(tool, "input"): spec} if spec else {}
    return ToolCall(tool, data)


_FORK = (
    "Skillscope has no {tool} tool: a skill with `context: fork` runs as a subagent when "
    "Skill(NAME) allows it; write Skill(NAME) instead"
)
# Why a call of a known tool is never decided under its name; {spec} is the rule's specifier.
_UNDECIDED = {
    "Task": _FORK,
    "Agent": _FORK,
    "WebFetch": (
        "Skillscope has no WebFetch tool: a command that fetches is a Bash call; write "
        "Bash(curl https://example.com/*) instead"
    ),
    "WebSearch": "Skillscope has no WebSearch tool and nothing searches the web; remove the rule",
    "NotebookEdit": (
        "Skillscope has no NotebookEdit tool: a notebook is a file written with Edit or Write; "
        "write Edit({path}) instead"
    ),
    "TodoWrite": "Skillscope has no TodoWrite tool; remove the rule",
    "skill_select_docs": (
        "choosing documents of a loaded skill needs no decision, and loading it is decided by "
        "Skill(NAME) rules; write Skill({skill}) instead"
    ),
    "skill_run": (
        "a skill_run command is decided by Bash(...) rules and its skill by Skill(NAME) rules; "
        "write Bash({command}) or Skill(NAME) instead"
    ),
}
# Stands for a `*` when a Bash pattern is read as a command: a plain word, so it parses as one.
_STAR_WORD = "skillscope_star_word"


def undecided_reason(tool: str, spec: str | None = None) -> str | None:
    """Why no call of `tool` is ever decided by rules under that name (what to write instead),
    or None when its calls are (or it is an MCP tool: servers are registered at run time)."""
    reason = _UNDECIDED.get(tool)
    if reason is None:
        return None
    return reason.format(
        tool=tool,
        path=spec or "./**/*.ipynb",
        skill=spec or "NAME",
        command=spec or "COMMAND",
    )


def _sample_command(spec: str) -> str:
    """A Bash pattern as a command: each `*` a plain word, each `\\*` a literal star."""
    return spec.replace("\\*", "\0").replace("*", _STAR_WORD).replace("\0", "\\*")


def _bash_allow_problem(spec: str) -> str | None:
    """Why an allow rule with this Bash pattern allows nothing, or None.

    Allow rules are matched against each simple command of a line on its own, as written and
    without its redirections (`bash.decide_bash`); only a pattern without `*` may also name a
    whole line exactly. A pattern that, read as a command, is not one simple command spans more
    than any single command can be.
    """
    if literal_text(spec) is not None:
        return None
    sample = _sample_command(spec)
    commands = analyze(sample).commands
    if not commands or any(c.text == sample for c in commands):
        return None
    parts = [c.text.replace(_STAR_WORD, "*") for c in commands]
    rules = ", ".join(f"Bash({p})" for p in dict.fromkeys(parts))
    return (
        f"allow Bash({spec}) never allows a call: an allow rule is matched against each command "
        "of a line on its own, as written without its redirections, and this pattern spans more "
        f"than one. Write one allow rule per command instead: {rules}; the file a redirection "
        "writes is decided by Edit(...) rules."
    )


def never_matches(rule: Rule) -> str | None:
    """Why `rule` can never match a call Skillscope makes, and what to write instead; None when
    it can."""
    if rule.tool in NO_PATH_SPECIFIER and rule.specifier is not None:
        return _decided_by_other(rule.tool, rule.specifier)
    reason = undecided_reason(rule.tool, rule.specifier)
    if reason is not None:
        return f"{rule.tool} rules are never consulted: {reason}."
    if rule.tool == "Bash" and rule.behavior == "allow" and rule.specifier is not None:
        return _bash_allow_problem(rule.specifier)
    return None


def mcp_parts(tool: str) -> tuple[str, str] | None:
    """(server, rest) of an `mcp__` tool or rule name ("" for the whole server), else None."""
    if not tool.startswith("mcp__"):
        return None
    server, _, name = tool[5:].partition("__")
    return server, name


def _listing(tools: Collection[str]) -> str:
    names = sorted(tools)
    shown = ", ".join(names[:12]) + (f" and {len(names) - 12} more" if len(names) > 12 else "")
    return shown or "none listed yet"


def mcp_rule_problem(rule: Rule, servers: Mapping[str, Collection[str]]) -> str | None:
    """Why an `mcp__` rule matches no tool of the registered servers today, or None.

    `servers`: each registered server's name and the names of the tools it lists. A rule naming
    a server that is not registered, or a tool (or prefix) its server does not list, is valid
    and may match later (a server registered, a tool added), but matches nothing now.
    """
    parts = mcp_parts(rule.tool)
    if parts is None:
        return None
    server, name = parts
    if server not in servers:
        return (
            f"No MCP server named {server!r} is registered, so {rule.text} matches nothing. "
            f"Registered servers: {', '.join(sorted(servers)) or 'none'}."
        )
    tools = servers[server]
    if name in ("", "*"):
        return None
    if name.endswith("*"):
        prefix = name[:-1]
        if any(t.startswith(prefix) for t in tools):
            return None
        return (
            f"No tool of the MCP server {server!r} starts with {prefix!r}, so {rule.text} "
            f"matches nothing today. Its tools: {_listing(tools)}."
        )
    if name in tools:
        return None
    hint = difflib.get_close_matches(name, list(tools), n=1)
    suggestion = f" Did you mean mcp__{server}__{hint[0]}?" if hint else ""
    return (
        f"The MCP server {server!r} lists no tool named {name!r}, so {rule.text} matches "
        f"nothing today.{suggestion} Its tools: {_listing(tools)}."
    )
