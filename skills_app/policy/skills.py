"""The skills a person's groups let them see and use (`SkillAccess`), as a skill provider.

An organisation skill (an organisation-wide upload, a SKILLS_DIRS or bundled folder) restricted to
groups the person is not in is gone for them: not listed, and not found by name (the model and a
`/name` get "unknown skill"). Their own personal skills are always theirs; one of the same name
as a hidden organisation skill takes its place, as it would if the organisation had none.
"""

from __future__ import annotations

from typing import Any, Protocol

from skills_app.core.registry import LoadFailure
from skills_app.core.skillfile import SkillSpec

PERSONAL = "personal"


class OfferedSkills(Protocol):
    """What ScopedSkills reads of the provider it wraps (registry.skills.UserSkills)."""

    def get(self, name: str) -> SkillSpec | None: ...

    def skills(self) -> list[SkillSpec]: ...

    def candidates(self) -> list[SkillSpec]: ...

    @property
    def failures(self) -> list[LoadFailure]: ...


class ScopedSkills:
    """A user's skill provider without the organisation skills their groups do not offer."""

    def __init__(self, provider: OfferedSkills, hidden: frozenset[str]) -> None:
        self.provider = provider
        self.hidden = hidden

    def _shown(self, spec: SkillSpec) -> bool:
        return spec.source == PERSONAL or spec.name not in self.hidden

    def get(self, name: str) -> SkillSpec | None:
        spec = self.provider.get(name)
        if spec is None or self._shown(spec):
            return spec
        personal: dict[str, SkillSpec] = getattr(self.provider, "personal", {})
        return personal.get(name)

    def skills(self) -> list[SkillSpec]:
        shown = {s.name: s for s in self.provider.skills() if self._shown(s)}
        for name, spec in getattr(self.provider, "personal", {}).items():
            shown.setdefault(name, spec)
        return sorted(shown.values(), key=lambda s: s.name)

    def candidates(self) -> list[SkillSpec]:
        return [s for s in self.provider.candidates() if self._shown(s)]

    @property
    def failures(self) -> list[LoadFailure]:
        # A hidden skill that failed to load is not named either.
        return [f for f in self.provider.failures if f.name not in self.hidden]

    def __getattr__(self, name: str) -> Any:
        # source_problems, registry, personal: the wrapped provider's.
        return getattr(self.provider, name)


def scoped(provider: OfferedSkills, hidden: frozenset[str]) -> Any:
    """`provider` without the hidden organisation skills (itself when nothing is hidden)."""
    return ScopedSkills(provider, hidden) if hidden else provider
