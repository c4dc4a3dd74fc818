"""The rule tester's reading of one call: the decision a run would make, and what it weighed.

Pure: the admin page (`skills_app.permissions.admin`) passes the enabled admin rules of the moment
and the active skill's own rules (assembled by `core.invocation.skill_rules`, as a run does).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .decide import decide
from .model import Decision, PermissionContext, Rule, ToolCall
from .rules import never_matches, undecided_reason
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
) -> Reading:
    """Decide `call` as a run with `skill` active would, in a workspace at `workspace`."""
    context = PermissionContext(
        workspace=workspace,
        admin_rules=tuple(admin_rules),
        active_skills=(skill,) if skill else (),
        skill_rules=tuple(skill_rules),
        readable_roots=(workspace / "skills",),
    )
    scoped = [r for r in admin_rules if r.scope_skill and r.scope_skill != skill]
    never = tuple(
        (rule, why)
        for rule in (*admin_rules, *skill_rules)
        if (why := never_matches(rule)) is not None
    )
    # The fix is named with the call's own argument (skill_run's command, for example).
    argument = next((v for v in call.input.values() if isinstance(v, str) and v), None)
    reason = undecided_reason(call.tool, argument)
    note = f"No {call.tool} call is ever decided under that name: {reason}." if reason else ""
    command = call.input.get("command") if call.tool in ("Bash", "skill_run") else None
    trusts = program_note(command) if isinstance(command, str) else ""
    return Reading(
        decide(call, context), len(admin_rules) - len(scoped), len(scoped), never, note, trusts
    )
