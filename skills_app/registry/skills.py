"""Django-side glue for the skill registry: one cached registry per process, built from settings.

Precedence, first wins a name clash: organisation-wide uploads (`extra_skills`) > the user's own
personal uploads (`skills_for_user`) > SKILLS_DIRS (an earlier folder wins) > bundled.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.models import Count, Max

from skills_app.core.catalog import build_catalog
from skills_app.core.registry import LoadFailure, SkillRegistry, SkillSource
from skills_app.core.skillfile import Problem, SkillFileError, SkillSpec, parse_skill_dir
from skills_app.models import SkillPackage, SkillVersion

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_cached: tuple[tuple[str, tuple[str, ...]], SkillRegistry] | None = None
_uploads_lock = threading.Lock()
_org_cache: tuple[tuple[Any, ...], list[SkillSpec]] | None = None
# Parsed uploaded versions. A version's files never change, so an entry never goes stale.
_parsed: dict[tuple[int, str, str, str], SkillSpec] = {}
_PARSED_MAX = 4096


def configured_sources() -> list[SkillSource]:
    """The skill folders from settings, highest precedence first."""
    sources = [SkillSource("dirs", Path(p)) for p in settings.SKILLS_DIRS]
    sources.append(SkillSource("bundled", Path(settings.BUNDLED_SKILLS_DIR)))
    return sources


def get_registry() -> SkillRegistry:
    """The process-wide registry; rebuilt when BUNDLED_SKILLS_DIR or SKILLS_DIRS change."""
    global _cached
    key = (str(settings.BUNDLED_SKILLS_DIR), tuple(str(p) for p in settings.SKILLS_DIRS))
    with _lock:
        if _cached is None or _cached[0] != key:
            # A lambda so a later rebinding of `extra_skills` (or a test's monkeypatch) is seen.
            registry = SkillRegistry(configured_sources(), extra=lambda: extra_skills())
            _cached = (key, registry)
        return _cached[1]


def registry_for_dirs(dirs: list[Path]) -> SkillRegistry:
    """A registry over exactly these folders (earlier wins), for `manage.py skills --dir`."""
    return SkillRegistry([SkillSource("dirs", Path(d)) for d in dirs])


def current_catalog(registry: SkillRegistry | None = None, *, budget: int | None = None) -> str:
    """The catalog text for a registry (default: the configured one) with the configured limits."""
    registry = registry or get_registry()
    return build_catalog(
        registry.skills(),
        budget=settings.SKILL_CATALOG_BUDGET if budget is None else budget,
        entry_cap=settings.SKILL_CATALOG_ENTRY_CAP,
    )


# --- uploaded skills -------------------------------------------------------------------------


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def parse_version(version: SkillVersion, name: str, source: str) -> SkillSpec | None:
    """The SkillSpec of one installed version (cached), or None when its files cannot be read."""
    from skills_app.registry.versions import version_dir

    folder = version_dir(version)
    key = (version.pk, str(folder), name, source)
    spec = _parsed.get(key)
    if spec is None:
        try:
            spec = parse_skill_dir(folder, name=name, source=source)
        except (SkillFileError, OSError, ValueError, TypeError, RecursionError) as exc:
            logger.warning("uploaded skill %s v%s cannot be loaded: %s", name, version.number, exc)
            return None
        with _uploads_lock:
            if len(_parsed) >= _PARSED_MAX:
                _parsed.clear()
            _parsed[key] = spec
    return spec


def extra_skills() -> list[SkillSpec]:
    """Enabled organisation-wide uploads (their approved active versions); they outrank every folder.

    Re-read only when the packages' fingerprint (count, last change, newest id) changes, so the
    registry's refresh on every lookup costs one small query. Inside an event loop the database
    may not be queried: the last list is returned, and `skills_for_user` (sync) refreshes it.
    """
    global _org_cache
    if _in_event_loop():
        cached = _org_cache
        return list(cached[1]) if cached is not None else []
    from skills_app.registry.versions import storage_root

    packages = SkillPackage.objects.filter(owner__isnull=True)
    stats = packages.aggregate(n=Count("id"), changed=Max("updated_at"), newest=Max("id"))
    key = (str(storage_root()), stats["n"], stats["changed"], stats["newest"])
    cached = _org_cache
    if cached is not None and cached[0] == key:
        return list(cached[1])
    # Only an approved version goes live for others (registry.review); activation checks it,
    # and so does this list, whatever else set the pointer.
    rows = (
        packages.filter(enabled=True, active_version__review_status=SkillVersion.APPROVED)
        .select_related("active_version")
        .order_by("name")
    )
    specs = [
        s
        for p in rows
        if p.active_version and (s := parse_version(p.active_version, p.name, "uploaded"))
    ]
    with _uploads_lock:
        _org_cache = (key, specs)
    return list(specs)


class UserSkills:
    """One user's skills: the shared registry with that user's personal uploads slotted in.

    Organisation uploads > personal uploads > SKILLS_DIRS > bundled. Other users' personal
    skills never appear. The personal list is a snapshot taken when the object is built, so
    `get()` and `skills()` are safe inside the agent's event loop.
    """

    def __init__(self, registry: SkillRegistry, personal: list[SkillSpec]) -> None:
        self.registry = registry
        self.personal = {s.name: s for s in personal}

    def get(self, name: str) -> SkillSpec | None:
        """The winning skill called `name` for this user, or None."""
        winner = self.registry.get(name)
        if winner is not None and winner.source == "uploaded":
            return winner
        return self.personal.get(name) or winner

    def skills(self) -> list[SkillSpec]:
        """Every winning skill for this user, sorted by name."""
        merged = {s.name: s for s in self.registry.skills()}
        for name, spec in self.personal.items():
            winner = merged.get(name)
            if winner is None or winner.source != "uploaded":
                merged[name] = spec
        return sorted(merged.values(), key=lambda s: s.name)

    def candidates(self) -> list[SkillSpec]:
        """Every loaded skill in precedence order, shadowed ones included."""
        base = self.registry.candidates()
        return [
            *(c for c in base if c.source == "uploaded"),
            *self.personal.values(),
            *(c for c in base if c.source != "uploaded"),
        ]

    @property
    def failures(self) -> list[LoadFailure]:
        """Skill folders that could not be loaded."""
        return self.registry.failures

    @property
    def source_problems(self) -> list[Problem]:
        """Configured skill folders that do not exist."""
        return self.registry.source_problems


def skills_for_user(user_id: int | None) -> UserSkills:
    """The skills one user may see and invoke. Call from sync code (it reads the database).

    Organisation skills restricted to groups the user is not in are left out
    (`skills_app.policy.skills`); `None` (no user: the audit, an organisation skill's trigger
    test) sees every skill.
    """
    from skills_app.policy.access import hidden_skills, user_groups
    from skills_app.policy.skills import scoped

    registry = get_registry()
    registry.refresh()  # brings the organisation uploads up to date for later async lookups
    personal: list[SkillSpec] = []
    if user_id is not None and settings.ALLOW_PERSONAL_SKILLS:
        rows = (
            SkillPackage.objects.filter(
                owner_id=user_id, enabled=True, active_version__isnull=False
            )
            .select_related("active_version")
            .order_by("name")
        )
        personal = [
            s
            for p in rows
            if p.active_version and (s := parse_version(p.active_version, p.name, "personal"))
        ]
    if user_id is None:
        return UserSkills(registry, personal)
    # Typed as UserSkills for its callers: ScopedSkills answers every one of its methods.
    provider: UserSkills = scoped(
        UserSkills(registry, personal), hidden_skills(user_groups(user_id))
    )
    return provider
