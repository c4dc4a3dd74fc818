"""Whose consent each offered skill's commands run under (docs/review.md).

- an organisation upload: the approval of its active version, when that approval stored a
  manifest and names the very digest the run loads ("the review of x v3 by mona"), covering
  no entry that names a file of the skill its reviewer was not shown as text (`_shown`);
- a bundled skill (written by this project) or a SKILLS_DIRS skill (put on the server by its
  operator): its install, with the manifest derived from its folder ("the install of x"),
  covering only the commands its body asks the model to run (`Consent.reviewed` is False);
- a personal skill, and an organisation version approved by migration (live before reviews
  existed, never reviewed): none. Their calls are decided by the rules and the user, as before.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from pathlib import Path

from django.db.models import F

from skills_app.core.review import (
    Consent,
    Manifest,
    build_manifest,
    read_package,
    shown_to_reviewer,
)
from skills_app.core.review.manifest import entry_paths
from skills_app.core.skillfile import SkillSpec
from skills_app.models import SkillReview
from skills_app.registry.versions import version_dir

logger = logging.getLogger(__name__)

INSTALL_WORDS = {
    "bundled": "bundled with Skillscope",
    "dirs": "put in SKILLS_DIRS by the server's operator",
}
_lock = threading.Lock()
_installed: dict[tuple[str, str], Manifest] = {}
# What each approval's reviewer was shown, by (review id, digest, shown whole): the files of a
# digest never change.
_shown: dict[tuple[int, str, bool], dict[str, bool]] = {}


def _install_manifest(spec: SkillSpec) -> Manifest | None:
    key = (str(spec.path), spec.digest)
    with _lock:
        cached = _installed.get(key)
    if cached is not None:
        return cached
    try:
        manifest = build_manifest(spec, read_package(Path(spec.path)))
    except OSError:
        logger.warning("cannot read the files of %s for its manifest", spec.name, exc_info=True)
        return None
    with _lock:
        if len(_installed) > 512:
            _installed.clear()
        _installed[key] = manifest
    return manifest


def _approvals(names: Iterable[str]) -> dict[str, SkillReview]:
    """The approval of each named organisation skill's active version (with a manifest)."""
    rows = (
        SkillReview.objects.filter(
            action=SkillReview.APPROVED,
            version__package__owner__isnull=True,
            version__package__name__in=list(names),
            version__package__active_version_id__isnull=False,
        )
        .select_related("version__package")
        .order_by("pk")
    )
    found: dict[str, SkillReview] = {}
    for row in rows:
        if row.version.package.active_version_id == row.version_id:
            found[row.version.package.name] = row  # the latest approval wins
    return found


def shown_for_review(review: SkillReview, manifest: Manifest) -> dict[str, bool] | None:
    """Each file of the approved version and whether its reviewer was shown it as text; None
    when no consented entry names a file of the skill (nothing to check).

    An approval made before the review page showed every file (`shown_whole` empty) was shown
    only what that page showed: the first files by path, and texts up to 512 KB.
    """
    if not any(e.consent and entry_paths(e) for e in manifest.entries):
        return None
    whole = bool(review.shown_whole)
    key = (review.pk, review.digest, whole)
    with _lock:
        if key in _shown:
            return _shown[key]
    try:
        shown = shown_to_reviewer(read_package(version_dir(review.version)), whole=whole)
    except OSError:
        logger.warning("cannot read the files of %s", review, exc_info=True)
        shown = {}  # nothing read, nothing shown: no entry that names a file is covered
    with _lock:
        if len(_shown) > 512:
            _shown.clear()
        _shown[key] = shown
    return shown


def consent_for_review(review: SkillReview, spec: SkillSpec) -> Consent | None:
    """The consent an approval gives the skill a run loaded, if it is that very content."""
    if review.digest != spec.digest or review.version.digest != spec.digest:
        return None  # changed under the approval: no consent, whatever the manifest says
    who = review.actor_name or "a reviewer"
    manifest = Manifest.from_data(review.manifest)
    return Consent(
        skill=spec.name,
        digest=spec.digest,
        label=f"the review of {spec.name} v{review.version_number} by {who}",
        entries=manifest.entries,
        arguments=tuple(spec.arguments),
        review_id=review.pk,
        reviewer_id=review.actor_id,
        shown=shown_for_review(review, manifest),
    )


def consents_for(specs: Iterable[SkillSpec]) -> dict[str, Consent]:
    """The consent each of these skills runs under, by name (skills without one are left out)."""
    specs = list(specs)
    uploaded = [s for s in specs if s.source == "uploaded"]
    approvals = _approvals(s.name for s in uploaded) if uploaded else {}
    out: dict[str, Consent] = {}
    for spec in specs:
        if spec.source == "uploaded":
            review = approvals.get(spec.name)
            consent = consent_for_review(review, spec) if review is not None else None
        elif spec.source in INSTALL_WORDS:
            manifest = _install_manifest(spec)
            consent = (
                Consent(
                    skill=spec.name,
                    digest=spec.digest,
                    label=f"the install of {spec.name} ({INSTALL_WORDS[spec.source]})",
                    entries=manifest.entries,
                    arguments=tuple(spec.arguments),
                    reviewed=False,
                )
                if manifest is not None
                else None
            )
        else:
            consent = None
        if consent is not None:
            out[spec.name] = consent
    return out


def still_live(consent: Consent, user_id: int | None) -> bool:
    """Whether a consent read when a run started still holds: the review's version is still the
    active one of an enabled package, and the skill is still offered to the person (their groups).

    One or two small queries, made only for a call a reviewed skill's consent would decide.
    """
    from skills_app.policy.access import hidden_skills, user_groups

    if user_id is not None and consent.skill in hidden_skills(user_groups(user_id)):
        return False
    if consent.review_id is None:
        return True  # the install of a bundled or SKILLS_DIRS skill: the server's files
    return SkillReview.objects.filter(
        pk=consent.review_id,
        version__package__enabled=True,
        version__package__active_version_id=F("version_id"),
    ).exists()


__all__ = ["INSTALL_WORDS", "consent_for_review", "consents_for", "shown_for_review", "still_live"]
