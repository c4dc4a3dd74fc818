"""Who may see and change trigger sets and runs.

- An organisation skill's trigger set and runs: skill managers and administrators (the
  "change skill package" permission) edit and run; auditors view.
- A personal skill's: only its owner edits and runs; auditors view. Nobody else learns that it
  exists (404, as for the package itself on the Skills page).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.http import Http404

from skills_app.audit.access import can_view_audit
from skills_app.models import SkillPackage, TriggerRun

MANAGE_PERMISSION = "skills_app.change_skillpackage"


def _signed_in(user: Any) -> bool:
    return bool(user is not None and user.is_authenticated and user.is_active)


def can_manage_owned(user: Any, owner_id: int | None) -> bool:
    """May edit and run the trigger tests of a skill owned by `owner_id` (None: organisation)."""
    if not _signed_in(user):
        return False
    if owner_id is not None:
        return bool(owner_id == user.pk)
    return bool(user.has_perm(MANAGE_PERMISSION))


def can_manage(user: Any, package: SkillPackage) -> bool:
    return can_manage_owned(user, package.owner_id)


def can_see_organisation(user: Any) -> bool:
    """Skill managers and auditors see every organisation skill's trigger tests."""
    return _signed_in(user) and (user.has_perm(MANAGE_PERMISSION) or can_view_audit(user))


def viewable_packages(user: Any) -> QuerySet[SkillPackage]:
    """The packages whose trigger tests `user` may read."""
    if not _signed_in(user):
        return SkillPackage.objects.none()
    if can_view_audit(user):
        return SkillPackage.objects.all()
    scope = Q(owner_id=user.pk)
    if user.has_perm(MANAGE_PERMISSION):
        scope |= Q(owner__isnull=True)
    return SkillPackage.objects.filter(scope)


def viewable_runs(user: Any) -> QuerySet[TriggerRun]:
    """The trigger runs whose reports `user` may read."""
    if not _signed_in(user):
        return TriggerRun.objects.none()
    if can_view_audit(user):
        return TriggerRun.objects.all()
    scope = Q(owner_id=user.pk)
    if user.has_perm(MANAGE_PERMISSION):
        scope |= Q(owner__isnull=True)
    return TriggerRun.objects.filter(scope)


def get_package_for_view(user: Any, pk: int) -> SkillPackage:
    """The package if `user` may read its trigger tests; 404 otherwise (no hint it exists)."""
    package = viewable_packages(user).select_related("active_version", "owner").filter(pk=pk)
    found = package.first()
    if found is None:
        raise Http404("No such skill package.")
    return found


def get_package_for_change(user: Any, pk: int) -> SkillPackage:
    """The package if `user` may edit and run its trigger tests; 404 or 403 otherwise."""
    package = get_package_for_view(user, pk)
    if not can_manage(user, package):
        raise PermissionDenied(
            "Only skill managers (and the owner of a personal skill) edit and run trigger "
            "tests; you may read them."
        )
    return package


def get_run_for_view(user: Any, pk: int) -> TriggerRun:
    """The run if `user` may read its report; 404 otherwise."""
    run = viewable_runs(user).select_related("package", "version").filter(pk=pk).first()
    if run is None:
        raise Http404("No such trigger run.")
    return run


def get_run_for_change(user: Any, pk: int) -> TriggerRun:
    """The run if `user` may stop it; 404 or 403 otherwise."""
    run = get_run_for_view(user, pk)
    if not can_manage_owned(user, run.owner_id):
        raise PermissionDenied("Only skill managers (or the skill's owner) stop trigger runs.")
    return run
