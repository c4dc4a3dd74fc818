"""What the review page shows: the whole package, nothing summarised away.

Every file (text shown whole, binaries listed with size and sha256), a diff of every file
against the active version (or the previous one when nothing is active yet), the lint report,
(the page adds the trigger-test figures of this version beside the active one's), the command manifest with
each entry exactly as written and in words, the trail of review steps, and the calls refused
because they quoted the skill's instructions (the attempts a reviewer should know about).
"""

from __future__ import annotations

from typing import Any

from skills_app.core.review import Manifest, PackageFile
from skills_app.models import PermissionDecision, SkillVersion
from skills_app.registry import review
from skills_app.registry.diffs import compare

REFUSALS_SHOWN = 20


def _problems(lint: Any) -> list[dict[str, Any]]:
    return [p for p in lint or [] if isinstance(p, dict)]


def baseline(version: SkillVersion) -> SkillVersion | None:
    """What this version is compared with: the active version, else the one before it."""
    package = version.package
    active = package.active_version
    if active is not None and active.pk != version.pk:
        return active
    return package.versions.filter(number__lt=version.number).order_by("-number").first()


def _files(version: SkillVersion) -> list[PackageFile]:
    """A version's files; none when they are gone from storage (the page says so)."""
    try:
        return review.version_files(version)
    except OSError:
        return []


def review_context(version: SkillVersion, user: Any) -> dict[str, Any]:
    """Everything the review page of `version` shows to `user` (a reviewer or the uploader)."""
    package = version.package
    digest_problem = ""
    try:
        review.check_digest(version)
    except review.ReviewError as exc:
        digest_problem = exc.message
    files = _files(version)
    against = baseline(version)
    diffs = compare(_files(against) if against is not None else [], files)
    try:
        manifest = review.manifest_of(version)
    except (review.ReviewError, OSError) as exc:
        digest_problem = digest_problem or str(exc)
        manifest = Manifest(())
    approval = review.approval_of(version)
    approved = Manifest.from_data(approval.manifest) if approval is not None else None
    refusals = PermissionDecision.objects.filter(
        skill=package.name, decision=PermissionDecision.REFUSED
    ).select_related("conversation__owner")[:REFUSALS_SHOWN]
    refusal = review.approve_refusal(version, user)
    return {
        "version": version,
        "package": package,
        "active": package.active_version,
        "against": against,
        "digest_problem": digest_problem,
        "files": files,
        "diffs": diffs,
        "changed": [d for d in diffs if d.status != "same"],
        "lint": _problems(version.lint),
        "manifest": manifest,
        "approval": approval,
        "approved_manifest": approved,
        "approved_matches": approved is not None and approved.digest == manifest.digest,
        "trail": review.trail(package),
        # Raw rows: the page shows their calls through the outbound filter (review_views).
        "refusals": list(refusals),
        "can_submit": version.review_status in (SkillVersion.DRAFT, SkillVersion.CHANGES_REQUESTED)
        and user.has_perm(review.SUBMIT_PERMISSION),
        "can_approve": not refusal and not digest_problem,
        "approve_refusal": refusal,
        "can_review": user.has_perm(review.REVIEW_PERMISSION)
        and version.review_status == SkillVersion.SUBMITTED,
        "can_activate": version.review_status == SkillVersion.APPROVED
        and not digest_problem
        and user.has_perm(review.ACTIVATE_PERMISSION)
        and package.active_version_id != version.pk,
        "versions": list(package.versions.select_related("uploaded_by").order_by("-number")),
    }


__all__ = ["baseline", "review_context"]
