"""Django-side glue for the skill registry: one cached registry per process, built from settings.

Precedence: uploaded skills (`extra_skills`) > SKILLS_DIRS (an earlier folder wins) > bundled.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path

from django.conf import settings

from skills_app.core.catalog import build_catalog
from skills_app.core.registry import SkillRegistry, SkillSource
from skills_app.core.skillfile import SkillSpec

_lock = threading.Lock()
_cached: tuple[tuple[str, tuple[str, ...]], SkillRegistry] | None = None


def extra_skills() -> Iterable[SkillSpec]:
    """Uploaded skills, already parsed; they outrank every folder. Empty until uploads are wired."""
    return ()


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


def skills_for_user(user_id: int | None) -> SkillRegistry:
    """The skills one user may see and invoke (personal skills are added by the uploads work)."""
    return get_registry()
