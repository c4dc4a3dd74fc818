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
from .steering import program_note


@dataclass(frozen=True, slots=True)
class Reading:
    decision: Decision
    # Admin rules that apply with this skill active, and those scoped to other skills.
    rules_considered: int
    scoped_elsewhere: int
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
    command = call.input.get("command") if call.tool in ("Bash", "skill_run") else None
    note = program_note(command) if isinstance(command, str) else ""
    return Reading(decide(call, context), len(admin_rules) - len(scoped), len(scoped), note)
