"""Skills an admin deny rule blocks: left out of the `/` menu and the model's catalog.

A skill that every invocation of would be refused is not offered: it would only fail, with a
Retry that can never succeed. The check is `decide()` itself on a plain `Skill(NAME)` call
against the enabled global deny rules (a rule scoped to one skill applies only while that
skill is active, so it never blocks a name). A skill stays reachable by name, so typing it
still explains which rule refuses it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from skills_app.core.agent import SkillProvider
from skills_app.core.permissions import PermissionContext, ToolCall, decide
from skills_app.core.skillfile import SkillSpec
from skills_app.permissions.approvals import admin_rules

# decide() needs a workspace; a Skill call never looks at one.
_NO_WORKSPACE = Path("/nonexistent-workspace")


def blocked_skills(names: Iterable[str], user_id: int | None = None) -> dict[str, str]:
    """{name: the rule that denies it} for the names a global deny rule refuses outright (the
    rules for everyone, and those for `user_id` and their groups)."""
    rules = [r for r in admin_rules(user_id) if r.behavior == "deny" and r.scope_skill is None]
    if not rules:
        return {}
    context = PermissionContext(workspace=_NO_WORKSPACE, admin_rules=tuple(rules))
    blocked: dict[str, str] = {}
    for name in names:
        decision = decide(ToolCall(tool="Skill", input={"skill": name}), context)
        if decision.behavior == "deny" and decision.rule is not None:
            blocked[name] = decision.rule.text
    return blocked


class OfferedSkills:
    """A provider without the blocked skills in its listing; `get` still finds them by name."""

    def __init__(self, provider: SkillProvider, blocked: Iterable[str]) -> None:
        self.provider = provider
        self.blocked = frozenset(blocked)

    def get(self, name: str) -> SkillSpec | None:
        return self.provider.get(name)

    def skills(self) -> list[SkillSpec]:
        return [s for s in self.provider.skills() if s.name not in self.blocked]


def offered(provider: SkillProvider, user_id: int | None = None) -> SkillProvider:
    """`provider` as offered to a person (`user_id`) and the model: blocked skills left out of
    listings."""
    blocked = blocked_skills((s.name for s in provider.skills()), user_id)
    return OfferedSkills(provider, blocked) if blocked else provider
