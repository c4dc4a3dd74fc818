"""Uploaded skill packages: install, versions, and lookups for the audit."""

from __future__ import annotations

from ..models import SkillVersion


def version_for_digest(name: str, digest: str) -> SkillVersion | None:
    """The uploaded version with this content, so an invocation keeps pointing at what it loaded."""
    if not digest:
        return None
    return (
        SkillVersion.objects.filter(package__name=name, digest=digest).order_by("-number").first()
    )
