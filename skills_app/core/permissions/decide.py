"""decide(): allow / ask / deny for a tool call, from the active rules and the defaults.

Deny rules, then ask rules, then allow rules, then the default. Bash calls are decided in
`bash` (every simple command in the parsed tree, write targets, blind spots). `read_filter`
turns the Read deny and ask rules into the per-file predicate Grep and Glob apply.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable

from ..rulematch import command_regex, domain_matches, is_inside, norm_path, path_matches
from .bash import decide_bash
from .model import (
    EDIT_TOOLS,
    PRIMARY_FIELD,
    READ_TOOLS,
    SKILL_LOADERS,
    Decision,
    McpHints,
    PermissionContext,
    Rule,
    ToolCall,
    describe,
    skill_subjects,
    str_field,
    target_path,
)
from .steering import describe as describe_steering
from .steering import names_explicitly, steering


def _covers(rule: Rule, tool: str) -> bool:
    """Whether a rule for rule.tool is consulted for a call of tool."""
    if rule.tool == tool:
        return True
    if rule.tool.startswith("mcp__") and tool.startswith("mcp__"):
        # mcp__server and mcp__server__* cover every tool of the server, mcp__server__pre* the
        # tools whose name starts with "pre"; mcp__server__tool only that tool (equal, above).
        server, _, name = rule.tool[5:].partition("__")
        return tool.startswith(f"mcp__{server}__{name.removesuffix('*')}") and (
            name == "" or name.endswith("*")
        )
    if rule.tool == "Skill":
        return tool in SKILL_LOADERS
    if rule.tool == "Read":
        # A deny on a Read path also protects that path from Edit and Write.
        edit_deny = rule.behavior == "deny" and rule.specifier is not None
        return tool in ("Glob", "Grep") or (edit_deny and tool in EDIT_TOOLS)
    return rule.tool == "Edit" and tool == "Write"


def covers(rule: Rule, tool: str) -> bool:
    """Whether `rule` is consulted for a call of `tool` (an `mcp__` rule: whether it names it)."""
    return _covers(rule, tool)


def _specifier_matches(rule: Rule, call: ToolCall, workspace: str, subjects: list[str]) -> bool:
    spec = rule.specifier
    if spec is None:
        return True
    if rule.tool in ("Bash", "Skill"):
        regex = command_regex(spec)
        return any(regex.fullmatch(subject) for subject in subjects)
    if rule.tool in ("Read", "Edit"):
        target = target_path(call, workspace)
        # Glob and Grep search a directory: a rule covering its contents covers the search.
        dir_tool = call.tool in ("Glob", "Grep")
        targets = (target, posixpath.join(target, "\0")) if dir_tool else (target,)
        return any(path_matches(spec, t, workspace) for t in targets)
    if rule.tool == "WebFetch":
        return domain_matches(spec.removeprefix("domain:"), str_field(call.input, "url"))
    key, sep, value = spec.partition(":")
    if sep and key.isidentifier() and key in call.input:
        return command_regex(value).fullmatch(str(call.input[key])) is not None
    primary = PRIMARY_FIELD.get(call.tool)
    values = [call.input.get(primary)] if primary else list(call.input.values())
    regex = command_regex(spec)
    return any(isinstance(v, str) and regex.fullmatch(v) for v in values)


def _default(call: ToolCall, context: PermissionContext, workspace: str) -> Decision:
    defaults, tool = context.defaults, call.tool
    fallback = defaults.get("Skill") if tool in SKILL_LOADERS else None
    behavior = defaults.get(tool) or fallback or defaults.get("*", "ask")
    if behavior != "deny" and tool in READ_TOOLS + EDIT_TOOLS:
        target = target_path(call, workspace)
        roots = [workspace]
        if tool in READ_TOOLS:
            roots += [norm_path(posixpath.join(workspace, str(r))) for r in context.readable_roots]
        if not any(is_inside(target, root) for root in roots):
            where = "the workspace and readable roots" if tool in READ_TOOLS else "the workspace"
            return Decision("deny", f"default for {tool}: {target} is outside {where}", None)
    if tool.startswith("mcp__") and not defaults.get(tool):
        # Said in full: the person asked, and the audit, learn that no rule named the tool.
        hints = context.mcp_hints.get(tool, McpHints())
        chosen = mcp_default(behavior, hints)
        if chosen != behavior:
            why = f"default for {tool}: {chosen}, as no rule names it; {hints.words()}"
        else:
            why = f"default for {tool}: {chosen}, as for every MCP tool no rule names"
            if hints.words():
                why += f"; {hints.words()}"
        return Decision(chosen, why, None)
    return Decision(behavior, f"default for {tool}: {behavior}", None)


def mcp_default(behavior: str, hints: McpHints) -> str:
    """The default of an MCP call no rule names: an attested readOnlyHint turns an ask into an
    allow, unless the same definition also says destructive (attested: it keeps asking).
    Unattested hints change nothing: the spec calls annotations untrusted."""
    attested = bool(hints.attested_by)
    if behavior == "ask" and attested and hints.read_only and not hints.destructive:
        return "allow"
    return behavior


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
    if call.tool == "Bash":
        decided = decide_bash(call, context, rules, workspace, decide)
        return decided or _default(call, context, workspace)
    if call.tool == "Skill" or call.tool in SKILL_LOADERS:
        subjects = skill_subjects(call)
    else:
        subjects = []
    if call.tool in READ_TOOLS + EDIT_TOOLS:
        denied = _denied_skill_files(target_path(call, workspace), context, workspace)
        if denied is not None:
            return denied
    for behavior in ("deny", "ask"):
        for rule in rules:
            if rule.behavior == behavior and _specifier_matches(rule, call, workspace, subjects):
                return Decision(behavior, describe(rule), rule)
    found = steering(target_path(call, workspace), workspace) if call.tool in EDIT_TOOLS else None
    allowed = next(
        (
            Decision("allow", describe(r), r)
            for r in rules
            if r.behavior == "allow"
            and _specifier_matches(r, call, workspace, subjects)
            and (
                found is None or (r.specifier is not None and names_explicitly(r.specifier, found))
            )
        ),
        None,
    )
    if allowed is not None:
        return allowed
    default = _default(call, context, workspace)
    if found is not None and default.behavior != "deny":
        return Decision("ask", describe_steering(found), None, protected=True)
    return default


def read_filter(context: PermissionContext) -> Callable[[str], bool]:
    """For ToolContext.path_allowed: False for a file a Read deny or ask rule covers.

    Grep and Glob results are filtered file by file with it, so a rule such as
    `deny Read(./work/secret/**)` keeps that content out of a search of the whole workspace.
    A Read *ask* rule hides the file too: a search must not show what reading would ask for.
    So do the staged files of a skill a deny rule refuses.
    """
    workspace = norm_path(str(context.workspace))
    guarded = [
        r
        for r in _active_rules(context)
        if r.tool == "Read" and r.specifier is not None and r.behavior in ("deny", "ask")
    ]

    def allowed(path: str) -> bool:
        target = norm_path(path)
        if _denied_skill_files(target, context, workspace) is not None:
            return False
        return not any(path_matches(r.specifier or "", target, workspace) for r in guarded)

    return allowed


def _denied_skill_files(target: str, context: PermissionContext, workspace: str) -> Decision | None:
    """Deny for a path inside the staged copy of a skill a `Skill(NAME)` deny rule refuses, or
    of a skill the conversation is no longer offered.

    A deny rule on a skill denies its files too: a copy staged before the rule was written
    stays in the workspace's skills/ folder (a readable root), named by `skill_folder_name`
    ("plugin:skill" is staged as "plugin__skill"). So does a copy staged while the person could
    use the skill, once they no longer may (`offered_skill_folders`).
    """
    for root in context.readable_roots:
        base = norm_path(posixpath.join(workspace, str(root)))
        if target == base or not is_inside(target, base):
            continue
        folder = posixpath.relpath(target, base).split("/", 1)[0]
        name = folder.replace("__", ":")
        offered = context.offered_skill_folders
        if offered is not None and not folder.startswith(".") and folder not in offered:
            reason = (
                f'the skill "{name}" is not offered to you here, so the copy of it staged in '
                "this conversation is not readable"
            )
            return Decision("deny", reason, None)
        call = ToolCall("Skill", {"skill": name})
        subjects = skill_subjects(call)
        for rule in _active_rules(context):
            if (
                rule.tool == "Skill"
                and rule.behavior == "deny"
                and _specifier_matches(rule, call, workspace, subjects)
            ):
                reason = f'{describe(rule)}: the files of the denied skill "{name}" are denied too'
                return Decision("deny", reason, rule)
    return None
