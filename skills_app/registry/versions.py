"""An installed skill's versions: where their files live, which one is active, enabled or not,
the SKILL.md diff between two, deletion (kept for the audit once used), lookup by content digest.

Installing new versions is `uploads.py`'s job; organisation versions go live through
`registry.review`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from skills_app.core.upload_checks import UploadError
from skills_app.models import SkillInvocation, SkillPackage, SkillReview, SkillVersion
from skills_app.policy import storage
from skills_app.registry.diffs import DiffLine, unified_lines

# --- storage -------------------------------------------------------------------------------


def storage_root() -> Path:
    """Where installed versions live: SKILL_STORAGE_ROOT, or MEDIA_ROOT/skills."""
    return storage.skill_storage_root()


def version_dir(version: SkillVersion) -> Path:
    """The folder of one installed version (storage_path is relative to the storage root)."""
    return storage_root() / version.storage_path


# --- the versions of a package ---------------------------------------------------------------


def activate_version(version: SkillVersion) -> None:
    """Make this personal version the package's active one (roll back or forward).

    Organisation versions go live only through `registry.review.activate`, after approval.
    """
    if version.package.owner_id is None:
        raise UploadError(
            f"{version.package.name} is an organisation skill: a version goes live for "
            "everyone only after its review (approve it, then make it active on its review page)"
        )
    if not version_dir(version).is_dir():
        raise UploadError(
            f"the files of {version.package.name} version {version.number} are missing from "
            f"storage ({version_dir(version)}); upload that content again"
        )
    package = version.package
    package.active_version = version
    package.save(update_fields=["active_version", "updated_at"])


def set_enabled(package: SkillPackage, enabled: bool) -> None:
    """Enable or disable a package; a disabled one is neither listed nor invocable."""
    package.enabled = enabled
    package.save(update_fields=["enabled", "updated_at"])


def skill_md_diff(a: SkillVersion, b: SkillVersion) -> tuple[DiffLine, ...]:
    """The unified diff of SKILL.md from version `a` to version `b`, classified for colouring."""
    lines, _cut = unified_lines(
        a.skill_md,
        b.skill_md,
        fromfile=f"{a.package.name} v{a.number}/SKILL.md",
        tofile=f"{b.package.name} v{b.number}/SKILL.md",
    )
    return lines


def delete_package(package: SkillPackage) -> str:
    """Delete a package with its versions and files; one a conversation used is disabled instead.

    Audit rows point at the version they loaded, and versions are never deleted under them.
    """
    used = SkillInvocation.objects.filter(version__package=package).count()
    reviewed = SkillReview.objects.filter(version__package=package).exists()
    if reviewed and not used:
        set_enabled(package, False)
        return (
            f"{package.name} has a review trail, which the audit keeps with its versions; it is "
            "disabled instead and no longer offered"
        )
    if used:
        set_enabled(package, False)
        return (
            f"{package.name} was used {used} time(s) in conversations, so its versions are kept "
            "for the audit; it is disabled instead and no longer offered"
        )
    folder = storage_root() / str(package.pk)
    name = package.name
    package.delete()
    shutil.rmtree(folder, ignore_errors=True)
    return f"{name} was deleted"


def version_for_digest(name: str, digest: str) -> SkillVersion | None:
    """The uploaded version with this content, so an invocation keeps pointing at what it loaded."""
    if not digest:
        return None
    return (
        SkillVersion.objects.filter(package__name=name, digest=digest).order_by("-number").first()
    )
