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


@dataclass(frozen=True, slots=True)
class Reading:
    decision: Decision
    # Admin rules that apply with this skill active, and those scoped to other skills.
    rules_considered: int
    scoped_elsewhere: int


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
    return Reading(decide(call, context), len(admin_rules) - len(scoped), len(scoped))
