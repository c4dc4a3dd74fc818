"""The review of organisation skill versions, before they go live for others (docs/review.md).

A version is stored as a draft (`uploads.create_draft_version`), submitted, then approved or
sent back with comments by someone with the reviewer permission; only an approved version can
be made active for everyone, and making an earlier approved version active again (a rollback)
is immediate. Each step is a `SkillReview` row: who, when, and the version digest they saw; an
approval also stores the command manifest it consented to and that manifest's digest.

Digest binding: every step that reads a version's files first checks that they still hash to
the version's digest, and an approval must name the manifest digest the reviewer was shown. A
file changed in storage after the upload therefore cannot be approved or activated, and an
approved manifest is never re-derived: consent comes from the stored one.

Shown whole: the review page shows every file of a version, in pages (`core.review.pages`). A
version it cannot show whole (too many pages, too long a manifest) is refused for review, at
submission and at approval, with the reason (`unshown`); an approval records that its reviewer
was shown the version whole (`SkillReview.shown_whole`).

Personal skills are their owner's alone and are never reviewed.
"""

from __future__ import annotations

import threading
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from skills_app.core.review import Manifest, PackageFile, build_manifest, read_package
from skills_app.core.review.pages import unshowable
from skills_app.core.skillfile import SkillFileError, SkillSpec, parse_skill_dir
from skills_app.core.tree import skill_digest
from skills_app.models import SkillPackage, SkillReview, SkillVersion
from skills_app.registry.trigger_gate import trigger_gate
from skills_app.registry.versions import version_dir

REVIEW_PERMISSION = "skills_app.review_skillversion"
SUBMIT_PERMISSION = "skills_app.add_skillpackage"
ACTIVATE_PERMISSION = "skills_app.change_skillpackage"

_lock = threading.Lock()
# Manifests derived from a version's files, by (version id, digest): the files never change.
_manifests: dict[tuple[int, str], Manifest] = {}


def may_manage(user: Any) -> bool:
    """Skill managers: upload for everyone, review, activate."""
    return bool(user.has_perm(SUBMIT_PERMISSION) or user.has_perm(REVIEW_PERMISSION))


class ReviewError(Exception):
    """A review step that cannot be taken; the message says why and what to do."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _name(user: Any) -> str:
    return user.get_username() if user is not None and user.is_authenticated else ""


def record(
    version: SkillVersion,
    action: str,
    actor: Any,
    *,
    comment: str = "",
    manifest: Manifest | None = None,
    origin: str = "",
    shown_whole: bool | None = None,
) -> SkillReview:
    """Append one step to the version's trail."""
    return SkillReview.objects.create(
        version=version,
        package_name=version.package.name,
        version_number=version.number,
        action=action,
        actor=actor if actor is not None and actor.is_authenticated else None,
        actor_name=_name(actor),
        digest=version.digest,
        manifest=manifest.as_data() if manifest is not None else [],
        manifest_digest=manifest.digest if manifest is not None else "",
        comment=comment[:5000],
        origin=origin,
        shown_whole=shown_whole,
    )


# -- reading a version --------------------------------------------------------------------------


def check_digest(version: SkillVersion) -> None:
    """ReviewError unless the version's files still hash to its digest."""
    folder = version_dir(version)
    try:
        actual = skill_digest(folder)
    except OSError:
        actual = ""
    if actual != version.digest:
        raise ReviewError(
            f"The files of {version.package.name} v{version.number} in storage no longer match "
            f"the digest they were uploaded with ({version.digest[:12]}), so what a reviewer "
            "would read is not what was uploaded. Upload the skill again as a new version."
        )


def version_spec(version: SkillVersion) -> SkillSpec:
    """The parsed skill of a version (ReviewError when its files cannot be read)."""
    try:
        return parse_skill_dir(version_dir(version), name=version.package.name, source="uploaded")
    except (SkillFileError, OSError, ValueError) as exc:
        raise ReviewError(
            f"{version.package.name} v{version.number} cannot be read ({exc}); upload it again."
        ) from None


def version_files(version: SkillVersion) -> list[PackageFile]:
    """Every file of a version, text or binary."""
    return read_package(version_dir(version))


def manifest_of(version: SkillVersion) -> Manifest:
    """The command manifest derived from the version's files (cached by id and digest)."""
    key = (version.pk, version.digest)
    with _lock:
        cached = _manifests.get(key)
    if cached is not None:
        return cached
    manifest = build_manifest(version_spec(version), version_files(version))
    with _lock:
        if len(_manifests) > 1024:
            _manifests.clear()
        _manifests[key] = manifest
    return manifest


def unshown(version: SkillVersion) -> str:
    """Why the review cannot show this version whole ("" when it can), and what to do."""
    try:
        problem = unshowable(version_files(version), len(manifest_of(version)))
    except OSError as exc:
        problem = f"its files cannot be read ({exc}); upload it again"
    return f"{version.package.name} v{version.number}: {problem}." if problem else ""


def approval_of(version: SkillVersion) -> SkillReview | None:
    """The step that approved this version (its latest), or None."""
    return (
        version.reviews.filter(action__in=(SkillReview.APPROVED, SkillReview.APPROVED_BY_MIGRATION))
        .select_related("actor")
        .order_by("-created_at", "-pk")
        .first()
    )


def submitter_of(version: SkillVersion) -> Any:
    step = version.reviews.filter(action=SkillReview.SUBMITTED).order_by("-pk").first()
    return step.actor if step is not None else None


# -- who may take a step --------------------------------------------------------------------


def _org(version: SkillVersion) -> None:
    if version.package.owner_id is not None:
        raise ReviewError(
            "Personal skills are their owner's alone and need no review; they are live for "
            "their owner as soon as they are uploaded."
        )


def approve_refusal(version: SkillVersion, user: Any) -> str:
    """Why `user` may not approve `version` now ("" when they may)."""
    if not user.has_perm(REVIEW_PERMISSION):
        return "Only people with the reviewer permission (the Skill manager role) approve skills."
    if version.review_status == SkillVersion.APPROVED:
        return f"Version {version.number} is already approved."
    if version.review_status != SkillVersion.SUBMITTED:
        return f"Version {version.number} has not been submitted for review yet."
    if reviewer_must_differ():
        authors = {version.uploaded_by_id, getattr(submitter_of(version), "pk", None)} - {None}
        if user.pk in authors:
            why = (
                "SKILL_REVIEWER_MUST_DIFFER"
                if settings.SKILL_REVIEWER_MUST_DIFFER is not None
                else "more than one person can review skills here, and SKILL_REVIEWER_MUST_DIFFER "
                "is not set to false"
            )
            return (
                "This server requires the reviewer to be someone other than the person who "
                f"uploaded or submitted the version ({why}); ask another skill manager to "
                "review it."
            )
    return ""


def reviewer_must_differ() -> bool:
    """Whether an approver must be someone other than the version's uploader and submitter:
    SKILL_REVIEWER_MUST_DIFFER when it is set, else whenever a second active account may
    review (four eyes as soon as there are two pairs)."""
    configured = settings.SKILL_REVIEWER_MUST_DIFFER
    if configured is not None:
        return bool(configured)
    # The permission as the database grants it (roles are groups), superusers included,
    # whichever sign-in backends are configured.
    reviewers = get_user_model().objects.with_perm(
        REVIEW_PERMISSION,
        is_active=True,
        include_superusers=True,
        backend="django.contrib.auth.backends.ModelBackend",
    )
    return len(reviewers.values_list("pk", flat=True)[:2]) > 1


# -- the steps ---------------------------------------------------------------------------------


def _locked(version: SkillVersion) -> SkillVersion:
    return SkillVersion.objects.select_for_update().select_related("package").get(pk=version.pk)


def submit(version: SkillVersion, user: Any, *, comment: str = "", origin: str = "") -> SkillReview:
    """Send a draft (or a version sent back with comments) to the reviewers."""
    _org(version)
    if not user.has_perm(SUBMIT_PERMISSION):
        raise ReviewError("Only skill managers submit organisation skills for review.")
    with transaction.atomic():
        version = _locked(version)
        if version.review_status not in (SkillVersion.DRAFT, SkillVersion.CHANGES_REQUESTED):
            raise ReviewError(
                f"Version {version.number} is {version.get_review_status_display()}; only a "
                "draft or a version with changes requested can be submitted."
            )
        check_digest(version)
        problem = unshown(version)
        if problem:
            raise ReviewError(problem)
        passed, why = trigger_gate(version)
        if not passed:
            # The skill's trigger gate (a per-skill setting, off by default) holds it back.
            raise ReviewError(why)
        version.review_status = SkillVersion.SUBMITTED
        version.save(update_fields=["review_status"])
        return record(version, SkillReview.SUBMITTED, user, comment=comment, origin=origin)


def approve(
    version: SkillVersion,
    reviewer: Any,
    *,
    manifest_digest: str,
    comment: str = "",
    origin: str = "",
) -> SkillReview:
    """Approve a submitted version with the manifest the reviewer was shown (by its digest)."""
    _org(version)
    with transaction.atomic():
        version = _locked(version)
        refusal = approve_refusal(version, reviewer)
        if refusal:
            raise ReviewError(refusal)
        check_digest(version)
        problem = unshown(version)
        if problem:
            raise ReviewError(problem)
        manifest = manifest_of(version)
        if manifest.digest != manifest_digest:
            raise ReviewError(
                "The command manifest is not the one you were shown (the page is out of date); "
                "open the review again and read it before approving."
            )
        version.review_status = SkillVersion.APPROVED
        version.save(update_fields=["review_status"])
        return record(
            version,
            SkillReview.APPROVED,
            reviewer,
            comment=comment,
            manifest=manifest,
            origin=origin,
            shown_whole=True,
        )


def request_changes(
    version: SkillVersion, reviewer: Any, *, comment: str, origin: str = ""
) -> SkillReview:
    """Send a submitted version back to its author with comments (they upload a new version)."""
    _org(version)
    if not comment.strip():
        raise ReviewError("Say what should change: the comment goes to the author.")
    if not reviewer.has_perm(REVIEW_PERMISSION):
        raise ReviewError("Only people with the reviewer permission review skills.")
    with transaction.atomic():
        version = _locked(version)
        if version.review_status != SkillVersion.SUBMITTED:
            raise ReviewError(f"Version {version.number} is not waiting for a review.")
        version.review_status = SkillVersion.CHANGES_REQUESTED
        version.save(update_fields=["review_status"])
        return record(
            version, SkillReview.CHANGES_REQUESTED, reviewer, comment=comment.strip(), origin=origin
        )


def activate(version: SkillVersion, user: Any, *, origin: str = "") -> SkillReview:
    """Make an approved version the one everyone gets (forward, or a rollback: immediate)."""
    _org(version)
    if not user.has_perm(ACTIVATE_PERMISSION):
        raise ReviewError("Only skill managers make organisation skill versions active.")
    with transaction.atomic():
        version = _locked(version)
        if version.review_status != SkillVersion.APPROVED:
            raise ReviewError(
                f"{version.package.name} v{version.number} is "
                f"{version.get_review_status_display()}: it goes live for others only after a "
                "skill manager approves it."
            )
        check_digest(version)
        package = SkillPackage.objects.select_for_update().get(pk=version.package_id)
        current = package.active_version
        if current is not None and current.pk == version.pk:
            raise ReviewError(f"Version {version.number} is already the active one.")
        package.active_version = version
        package.save(update_fields=["active_version", "updated_at"])
        back = current is not None and current.number > version.number
        action = SkillReview.ROLLED_BACK if back else SkillReview.ACTIVATED
        note = f"was v{current.number}" if current is not None else "first active version"
        return record(version, action, user, comment=note, origin=origin)


def review_queue() -> list[SkillVersion]:
    """Organisation versions waiting for a reviewer, oldest first."""
    return list(
        SkillVersion.objects.filter(
            package__owner__isnull=True, review_status=SkillVersion.SUBMITTED
        )
        .select_related("package", "uploaded_by")
        .order_by("created_at")
    )


def open_drafts() -> list[SkillVersion]:
    """Organisation versions still with their authors (drafts, changes requested), newest first."""
    return list(
        SkillVersion.objects.filter(
            package__owner__isnull=True,
            review_status__in=(SkillVersion.DRAFT, SkillVersion.CHANGES_REQUESTED),
        )
        .select_related("package", "uploaded_by")
        .order_by("-created_at")
    )


def trail(package: SkillPackage) -> list[SkillReview]:
    """Every review step of a package's versions, in the order they were taken."""
    return list(
        SkillReview.objects.filter(version__package=package)
        .select_related("actor")
        .order_by("created_at", "pk")
    )


__all__ = [
    "ACTIVATE_PERMISSION",
    "REVIEW_PERMISSION",
    "SUBMIT_PERMISSION",
    "ReviewError",
    "activate",
    "approval_of",
    "approve",
    "approve_refusal",
    "check_digest",
    "manifest_of",
    "open_drafts",
    "record",
    "request_changes",
    "review_queue",
    "reviewer_must_differ",
    "submit",
    "trail",
    "unshown",
    "version_files",
    "version_spec",
]
