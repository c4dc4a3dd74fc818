"""Installing uploaded skills: read the upload, stage and lint each skill (`staging.py`), store
them atomically as new versions, in the scope asked for (who may, and how much: `upload_limits.py`).
The installed versions are managed in `versions.py` (activation, enabling, diffs, deletion, lookup
by digest).

Accepted uploads (`upload_checks` does the reading and the hostile-input checks):
- a zip (`.zip` or `.skill`) whose root is the skill folder: `my-skill/SKILL.md` -> `my-skill`;
- a zip with `SKILL.md` at its root: named by its frontmatter `name:` when that is a valid
  skill name, otherwise by the zip's file name without extension (`my-skill.zip` -> `my-skill`);
- a plugin: `skills/<name>/SKILL.md` at the root (plugin name = the zip's file name) or
  `<plugin>/skills/<name>/SKILL.md` (plugin name = that folder); skills become `plugin:name`,
  files outside `skills/<name>/` are not installed (the result says so);
- a folder chosen in the browser (relative paths start with the folder's name) or on disk (CLI).

Install: files are written to a temporary folder under the storage root and linted there
(the spec checks of `core.lint` and the run-time checks of `core.lint_runtime`); lint errors
refuse the upload. Then, inside one transaction, each skill gets its package row and an
immutable SkillVersion keyed by the folder's digest (`core.tree.skill_digest`, the registry's
digest), and the folder is renamed to `<root>/<package id>/<digest>/`. Any failure removes what
was written and rolls the rows back: a refused upload leaves no file and no row.

Review: an organisation skill's version is stored as a *draft* with an "uploaded" step in its
review trail and is never made active here; it goes live for others only through
`registry.review` (submit, approve, activate). `create_draft_version` is the one entrance for
files that come from elsewhere (Git sync). A personal version needs no review and becomes its
owner's active version as before.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max

from skills_app.core.skilltypes import Problem
from skills_app.core.upload_checks import (
    Layout,
    UploadError,
    archive_stem,
    check_files,
    find_skills,
    read_directory,
    read_zip,
)
from skills_app.models import SkillPackage, SkillReview, SkillVersion
from skills_app.policy import storage
from skills_app.registry import trigger_sets
from skills_app.registry.staging import (
    Staged,
    json_safe,
    problem_json,
    stage,
)
from skills_app.registry.upload_limits import (
    ORG_PERMISSION,
    check_scope,
    limits,
    reserve_personal,
)

# Managing the installed versions is versions.py's job; re-exported for the many callers that
# reach them through uploads.
from skills_app.registry.versions import (
    activate_version,
    delete_package,
    set_enabled,
    skill_md_diff,
    storage_root,
    version_dir,
    version_for_digest,
)

__all__ = [
    "ORG_PERMISSION",
    "InstallResult",
    "UploadError",
    "UploadFile",
    "activate_version",
    "create_draft_version",
    "delete_package",
    "install_archive",
    "install_directory",
    "install_files",
    "install_layout",
    "limits",
    "set_enabled",
    "skill_md_diff",
    "storage_root",
    "version_dir",
    "version_for_digest",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class UploadFile:
    """One file of a browser folder upload (its webkitdirectory relative path)."""

    path: str
    data: bytes


@dataclass(frozen=True, slots=True)
class InstallResult:
    package: SkillPackage
    version: SkillVersion
    created: bool  # False: a version with this digest already existed, nothing changed
    warnings: list[Problem]
    message: str
    # The new version's catalog text (description, when_to_use) differs from the version that
    # was active: worth a trigger run before (or after) it goes live.
    description_changed: bool = False
    # Stored without being made active (the active version stays until an admin activates it).
    candidate: bool = False

    @property
    def draft(self) -> bool:
        """An organisation version waiting for its review."""
        return self.version.review_status in (
            SkillVersion.DRAFT,
            SkillVersion.SUBMITTED,
            SkillVersion.CHANGES_REQUESTED,
        )


# --- public API ----------------------------------------------------------------------------


def install_archive(
    data: bytes,
    filename: str,
    *,
    user: Any,
    personal: bool = False,
    activate: bool = True,
    origin: str = "upload",
) -> list[InstallResult]:
    """Install the skill(s) of a .zip / .skill upload; several results for a plugin.

    Organisation skills become drafts (see the module docstring). For a personal skill,
    `activate=False` stores a new version as a candidate: the active version stays until its
    owner activates the new one (after comparing its trigger tests).
    """
    check_scope(user, personal)
    members = read_zip(data, filename, limits())
    layout = find_skills(members, stem=archive_stem(filename))
    return _install(layout, user, personal, activate, origin)


def install_files(
    files: list[UploadFile],
    *,
    user: Any,
    personal: bool = False,
    activate: bool = True,
    origin: str = "upload",
) -> list[InstallResult]:
    """Install a folder chosen in the browser."""
    check_scope(user, personal)
    members = check_files([(f.path, f.data) for f in files], limits())
    return _install(find_skills(members, stem=None), user, personal, activate, origin)


def install_directory(
    path: Path,
    *,
    user: Any = None,
    personal: bool = False,
    activate: bool = True,
    origin: str = "cli",
) -> list[InstallResult]:
    """Install a skill or plugin folder from disk (`manage.py skills import`)."""
    check_scope(user, personal)
    members = read_directory(Path(path), limits())
    return _install(find_skills(members, stem=None), user, personal, activate, origin)


def create_draft_version(
    files: list[UploadFile], *, user: Any, origin: str, stem: str | None = None
) -> list[InstallResult]:
    """Store organisation skill files as draft versions, each waiting for its review.

    The one entrance for files from anywhere (an upload, `manage.py skills import`, a Git
    sync): checked against the upload limits and path rules, linted, stored immutably by
    digest, with an "uploaded" step (`origin` says from where) in the review trail. Content
    identical to an existing version changes nothing. `stem` names a skill whose SKILL.md sits
    at the root of `files` and has no valid `name:`.
    """
    check_scope(user, False)
    members = check_files([(f.path, f.data) for f in files], limits())
    return _install(find_skills(members, stem=stem), user, False, False, origin)


def install_layout(
    layout: Layout,
    *,
    user: Any,
    personal: bool = False,
    activate: bool = True,
    origin: str = "git",
) -> list[InstallResult]:
    """Install skills already found and checked elsewhere (a Git source's personal skills)."""
    check_scope(user, personal)
    return _install(layout, user, personal, activate, origin)


# --- install -------------------------------------------------------------------------------


def _install(
    layout: Layout, user: Any, personal: bool, activate: bool = True, origin: str = "upload"
) -> list[InstallResult]:
    root = storage_root()
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".upload-", dir=root))
    written: list[Path] = []
    reserved = 0
    try:
        staged = [stage(c, staging / str(i)) for i, c in enumerate(layout.skills)]
        ignored = _ignored_warning(layout)
        reserved = reserve_personal(staged, user) if personal else 0
        try:
            with transaction.atomic():
                results = [
                    _store(s, user, personal, root, written, activate, origin) for s in staged
                ]
        except IntegrityError:
            raise UploadError(
                "another upload of the same skill finished at the same moment; try again"
            ) from None
        if ignored:
            results = [replace(r, warnings=[*r.warnings, ignored]) for r in results]
        return results
    except BaseException:
        for path in reversed(written):
            shutil.rmtree(path, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if reserved:
            # Stored: the versions count now (storage.personal_skill_bytes); or nothing was.
            storage.release(user.pk, reserved)


def _ignored_warning(layout: Layout) -> Problem | None:
    if not layout.ignored:
        return None
    shown = ", ".join(layout.ignored[:5]) + (" ..." if len(layout.ignored) > 5 else "")
    return Problem(
        "warning",
        "not-installed",
        f"{len(layout.ignored)} file(s) outside skills/<name>/ were not installed: {shown}",
        "",
    )


def _store(
    staged: Staged,
    user: Any,
    personal: bool,
    root: Path,
    written: list[Path],
    activate: bool = True,
    origin: str = "upload",
) -> InstallResult:
    name = staged.candidate.name
    owner = user if personal else None
    package, _ = SkillPackage.objects.select_for_update().get_or_create(name=name, owner=owner)
    digest = staged.spec.digest
    existing = package.versions.filter(digest=digest).first()
    if existing is not None:
        note = "" if package.active_version_id == existing.pk else " (not the active version)"
        return InstallResult(
            package,
            existing,
            False,
            staged.warnings,
            f"{name} is already installed as version {existing.number}{note}; nothing changed",
        )
    number = (package.versions.aggregate(n=Max("number"))["n"] or 0) + 1
    package_dir = root / str(package.pk)
    if not package_dir.exists():
        package_dir.mkdir()
        written.append(package_dir)
    target = package_dir / digest
    if target.exists():
        # Left by an install whose transaction failed after the rename; same digest, same bytes.
        shutil.rmtree(target)
    os.rename(staged.folder, target)
    written.append(target)
    version = SkillVersion.objects.create(
        package=package,
        digest=digest,
        number=number,
        storage_path=f"{package.pk}/{digest}",
        skill_md=staged.skill_md,
        frontmatter=json_safe(dict(staged.spec.frontmatter)),
        lint=[problem_json(p) for p in staged.warnings],
        uploaded_by=user if getattr(user, "is_authenticated", False) else None,
        review_status=SkillVersion.PERSONAL if personal else SkillVersion.DRAFT,
    )
    previous = package.active_version
    scope = "personal" if personal else "organisation-wide"
    state = "" if package.enabled else "; the package is disabled, enable it to offer it"
    if personal:
        # A candidate needs an active version beside it; a new skill's first version is active.
        candidate = not activate and previous is not None
        if not candidate:
            package.active_version = version
        if candidate and previous is not None:
            state += f"; stored as a candidate, version {previous.number} stays active"
    else:
        from skills_app.registry.review import record

        candidate = True
        record(version, SkillReview.UPLOADED, user, origin=origin)
        live = f"version {previous.number} stays active" if previous else "nothing is live yet"
        state += f"; stored as a draft ({live}): it goes live for others after its review"
    package.save(update_fields=["active_version", "updated_at"])
    picked, problem = trigger_sets.pick_up_for_install(
        package, target, origin=staged.candidate.origin, user=user
    )
    warnings = [*staged.warnings, *([problem] if problem else [])]
    state += f"; {picked}" if picked else ""
    return InstallResult(
        package,
        version,
        True,
        warnings,
        f"installed {name} version {number} ({scope}, digest {digest[:12]}){state}",
        description_changed=previous is not None
        and trigger_sets.catalog_changed(previous.frontmatter, version.frontmatter),
        candidate=candidate,
    )
