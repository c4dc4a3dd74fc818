"""What an upload may do: the size limits from settings, who may install for whom (a personal
skill, or the organisation permission for everyone), and room in the person's storage quota.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from skills_app.core.tools.storage import tree_bytes
from skills_app.core.upload_checks import Limits, UploadError
from skills_app.models import SkillVersion
from skills_app.policy import storage
from skills_app.registry.staging import Staged

ORG_PERMISSION = "skills_app.add_skillpackage"


def limits() -> Limits:
    """The upload limits from settings."""
    return Limits(
        max_total_bytes=settings.UPLOAD_MAX_TOTAL_BYTES,
        max_files=settings.UPLOAD_MAX_FILES,
        max_file_bytes=settings.UPLOAD_MAX_FILE_BYTES,
        max_ratio=settings.UPLOAD_MAX_RATIO,
    )


def check_scope(user: Any, personal: bool) -> None:
    """UploadError unless `user` may install here: personal skills on and signed in, or the
    organisation permission for an organisation-wide install (`user` None: the CLI, trusted)."""
    if personal:
        if not settings.ALLOW_PERSONAL_SKILLS:
            raise UploadError(
                "personal skills are turned off on this server (ALLOW_PERSONAL_SKILLS); ask an "
                "administrator to install the skill for everyone"
            )
        if user is None or not getattr(user, "is_authenticated", False):
            raise UploadError("a personal skill needs an owner; sign in or name the user")
    elif user is not None and not user.has_perm(ORG_PERMISSION):
        raise UploadError(
            "only administrators can install skills for the whole organisation; upload it as a "
            "personal skill instead"
        )


def reserve_personal(staged: list[Staged], user: Any) -> int:
    """Room in the person's storage quota for the new versions of their personal skills (all of
    it, or UploadError with the figures); the bytes reserved."""
    user_id = getattr(user, "pk", None)
    if user_id is None:
        return 0
    known = set(
        SkillVersion.objects.filter(
            package__owner_id=user_id, package__name__in=[s.candidate.name for s in staged]
        ).values_list("package__name", "digest")
    )
    needed = sum(
        tree_bytes(s.folder) for s in staged if (s.candidate.name, s.spec.digest) not in known
    )
    if not needed:
        return 0
    try:
        granted, _now = storage.reserve(user_id, needed, at_least=needed)
    except storage.StorageFull as exc:
        raise UploadError(str(exc)) from None
    return granted
