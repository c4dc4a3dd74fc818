"""The rule tester's reading of one call: the decision a run would make, and what it weighed.

Pure: the admin page (`skills_app.permissions.admin`) passes the enabled admin rules of the moment
and the active skill's own rules (assembled by `core.invocation.skill_rules`, as a run does).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .decide import covers, decide, mcp_default
from .model import Decision, McpHints, PermissionContext, Rule, ToolCall, describe
from .rules import mcp_parts, mcp_rule_problem, never_matches, undecided_reason
from .steering import program_note


@dataclass(frozen=True, slots=True)
class Reading:
    decision: Decision
    # Admin rules that apply with this skill active, and those scoped to other skills.
    rules_considered: int
    scoped_elsewhere: int
    # The rules given (admin and the skill's own) that can never match any call, with why.
    never_matching: tuple[tuple[Rule, str], ...] = ()
    # When no call of this tool is ever decided under its name: why, and what decides it.
    call_note: str = ""
    # For a command: what its program also reads and obeys besides the command line, and how
    # commands are kept from obeying what the model wrote there ("" when nothing is known).
    also_trusts: str = ""


def read_call(
    call: ToolCall,
    *,
    admin_rules: Sequence[Rule],
    skill: str,
    skill_rules: Sequence[Rule],
    workspace: Path,
    mcp_servers: Mapping[str, Collection[str]] | None = None,
    mcp_hints: Mapping[str, McpHints] | None = None,
) -> Reading:
    """Decide `call` as a run with `skill` active would, in a workspace at `workspace`.

    `mcp_servers` (each registered MCP server and the tools it lists) lets the reading say which
    `mcp__` rules match nothing today and whether the call's own tool exists; None: not known.
    `mcp_hints`: each MCP tool's hints and who attested them, as a run weighs them.
    """
    context = PermissionContext(
        workspace=workspace,
        admin_rules=tuple(admin_rules),
        active_skills=(skill,) if skill else (),
        skill_rules=tuple(skill_rules),
        readable_roots=(workspace / "skills",),
        mcp_hints=mcp_hints or {},
    )
    scoped = [r for r in admin_rules if r.scope_skill and r.scope_skill != skill]
    never = tuple(
        (rule, why)
        for rule in (*admin_rules, *skill_rules)
        if (why := _never(rule, mcp_servers)) is not None
    )
    # The fix is named with the call's own argument (skill_run's command, for example).
    argument = next((v for v in call.input.values() if isinstance(v, str) and v), None)
    reason = undecided_reason(call.tool, argument)
    note = f"No {call.tool} call is ever decided under that name: {reason}." if reason else ""
    active = [r for r in admin_rules if not r.scope_skill or r.scope_skill == skill]
    if mcp_parts(call.tool) is not None:
        hints = (mcp_hints or {}).get(call.tool, McpHints())
        note = mcp_note(call.tool, [*active, *skill_rules], mcp_servers, hints)
    command = call.input.get("command") if call.tool in ("Bash", "skill_run") else None
    trusts = program_note(command) if isinstance(command, str) else ""
    return Reading(
        decide(call, context), len(admin_rules) - len(scoped), len(scoped), never, note, trusts
    )


def _never(rule: Rule, mcp_servers: Mapping[str, Collection[str]] | None) -> str | None:
    why = never_matches(rule)
    if why is None and mcp_servers is not None:
        why = mcp_rule_problem(rule, mcp_servers)
    return why


def mcp_note(
    tool: str,
    rules: Sequence[Rule],
    mcp_servers: Mapping[str, Collection[str]] | None,
    hints: McpHints | None = None,
) -> str:
    """How the rules decide a call of the MCP tool `tool`, in words: the rules that name it (deny
    wins), or that none does and so the default decides (it asks, unless a reviewer attested the
    tool read-only); and whether its server and tool exist."""
    hints = hints or McpHints()
    parts = mcp_parts(tool)
    if parts is None:
        return ""
    server, name = parts
    naming = [r for r in rules if covers(r, tool)]
    words: list[str] = []
    would = (
        f"(mcp__{server}, mcp__{server}__*, a prefix such as mcp__{server}__{name[:3]}* or the "
        "tool itself would)"
    )
    if not naming and mcp_default("ask", hints) == "allow":
        words.append(
            f"No rule names {tool}; {hints.words()}, so the call is allowed without asking. A "
            f"rule naming it {would} decides instead; a changed definition loses the attestation."
        )
    elif not naming:
        words.append(
            f"No rule names {tool} {would}, so the call asks the person: an MCP call no rule "
            "names asks, unless a reviewer attested its tool read-only."
        )
        if hints.words():
            words.append(f"Its hints: {hints.words()}.")
    else:
        listed = "; ".join(f"{r.behavior}: {describe(r)}" for r in naming)
        words.append(f"Rules naming {tool}: {listed}.")
        behaviors = {r.behavior for r in naming}
        if "deny" in behaviors and len(behaviors) > 1:
            words.append("Deny wins over ask and allow, whatever their order.")
        elif "ask" in behaviors and "allow" in behaviors:
            words.append("Ask wins over allow, whatever their order.")
    if mcp_servers is not None:
        if server not in mcp_servers:
            words.append(
                f"No MCP server named {server!r} is registered, so the model is never offered "
                "this tool."
            )
        elif name not in mcp_servers[server]:
            words.append(
                f"The MCP server {server!r} lists no tool named {name!r}, so the model is not "
                "offered it."
            )
    return " ".join(words)
