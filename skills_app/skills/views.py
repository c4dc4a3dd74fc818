"""The "Skills" page: a catalog of the skills a person gets, their personal uploads, and for
skill managers the developer view (sources, digests, shadowing, lint), the review queue and the
upload for everyone (`review_views`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db.models import F, Q
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from skills_app.core.redact import HiddenIndex
from skills_app.core.skillfile import Problem, SkillSpec
from skills_app.http import AuthedHttpRequest
from skills_app.models import SkillPackage, SkillVersion
from skills_app.permissions.approvals import admin_rules
from skills_app.permissions.blocked import blocked_skills
from skills_app.permissions.outlook import outlooks
from skills_app.registry import catalog, review, uploads, versions
from skills_app.registry.skills import UserSkills, skills_for_user
from skills_app.registry.upload_files import folder_files, read_upload

SOURCE_LABELS = {
    "uploaded": "uploaded",
    "personal": "personal",
    "dirs": "SKILLS_DIRS",
    "bundled": "bundled",
}


@dataclass(frozen=True, slots=True)
class SkillRow:
    name: str
    description: str
    source: str
    version: SkillVersion | None
    digest: str
    model_invocable: bool
    user_invocable: bool
    warnings: list[Problem]
    errors: list[Problem]
    shadowed_by: str | None  # the source of the skill that wins the name, when this one loses
    loaded: bool = True
    blocked_by: str = ""  # the deny rule that refuses every invocation, if one does


def _get_package_for_user(request: AuthedHttpRequest, pk: int) -> SkillPackage:
    """The user's own personal package; 404 for anyone else's (no hint that it exists)."""
    try:
        return SkillPackage.objects.get(pk=pk, owner=request.user)
    except SkillPackage.DoesNotExist:
        raise Http404("No such skill package.") from None


def _versions_by_dir(user_id: int) -> dict[str, SkillVersion]:
    """Active versions the user can see, keyed by their folder, to label registry entries."""
    active = SkillVersion.objects.filter(
        Q(package__owner__isnull=True) | Q(package__owner_id=user_id),
        package__active_version=F("pk"),
    ).select_related("package")
    return {str(versions.version_dir(v).absolute()): v for v in active}


def skill_rows(provider: UserSkills, user_id: int) -> list[SkillRow]:
    """Every loaded skill (shadowed ones included) and every skill that failed to load."""
    winners = {s.name: s for s in provider.skills()}
    versions = _versions_by_dir(user_id)
    blocked = blocked_skills(winners, user_id)
    rows: list[SkillRow] = []
    for spec in provider.candidates():
        winner = winners.get(spec.name)
        rows.append(replace(_row(spec, winner, versions), blocked_by=blocked.get(spec.name, "")))
    for failure in provider.failures:
        rows.append(
            SkillRow(
                name=failure.name,
                description="",
                source=SOURCE_LABELS.get(failure.source, failure.source),
                version=None,
                digest="",
                model_invocable=False,
                user_invocable=False,
                warnings=[],
                errors=[failure.problem],
                shadowed_by=None,
                loaded=False,
            )
        )
    rows.sort(key=lambda r: (r.name, r.shadowed_by is not None))
    return rows


def _shown_problems(spec: SkillSpec, problems: list[Problem]) -> list[Problem]:
    """Lint messages as a person without the inspect permission may read them.

    The lint never quotes a body (it names the rule and the line); this is the outbound filter
    behind that promise, against the skill's own body, so a new rule cannot break it.
    """
    if not problems:
        return problems
    index = HiddenIndex([spec.body])
    return [replace(p, message=index.redact(p.message)) for p in problems]


def _row(spec: SkillSpec, winner: SkillSpec | None, versions: dict[str, SkillVersion]) -> SkillRow:
    # Narrowed here (not through a bool) so the type checker sees winner is set when shadowed.
    shadowed_by = None
    if winner is not None and winner is not spec:
        shadowed_by = SOURCE_LABELS.get(winner.source, winner.source)
    return SkillRow(
        name=spec.name,
        description=spec.description,
        source=SOURCE_LABELS.get(spec.source, spec.source),
        version=versions.get(str(Path(spec.path).absolute())),
        digest=spec.digest,
        model_invocable=spec.model_invocable,
        user_invocable=spec.user_invocable,
        warnings=_shown_problems(spec, spec.warnings),
        errors=_shown_problems(spec, spec.errors),
        shadowed_by=shadowed_by,
    )


def render_page(request: AuthedHttpRequest, *, status: int = 200, **extra: Any) -> HttpResponse:
    """The Skills page for this person, with what an action adds (an upload's results, errors)."""
    provider = skills_for_user(request.user.pk)
    personal = (
        SkillPackage.objects.filter(owner=request.user)
        .select_related("active_version")
        .order_by("name")
    )
    manager = review.may_manage(request.user)
    rows = catalog.catalog_rows(
        provider.skills(), request.user.pk, catalog.rules_context(admin_rules(request.user.pk))
    )
    found = outlooks([r.spec for r in rows], request.user.pk, {r.spec.name: r.access for r in rows})
    context = {
        "catalog": [replace(r, outlook=found.get(r.spec.name)) for r in rows],
        "manager": manager,
        # Developer columns (digests, sources, shadowing, lint) are for skill managers.
        "rows": skill_rows(provider, request.user.pk) if manager else [],
        "can_upload_org": request.user.has_perm(uploads.ORG_PERMISSION),
        "queue": review.review_queue() if manager else [],
        "drafts": review.open_drafts() if manager else [],
        "allow_personal": settings.ALLOW_PERSONAL_SKILLS,
        "personal_packages": personal,
        "limits": uploads.limits(),
        **extra,
    }
    return render(request, "skills_app/skills/skills.html", context, status=status)


@login_required
@require_GET
def skills_page(request: AuthedHttpRequest) -> HttpResponse:
    """Every skill the user can see, with source, version, digest, invocability and lint."""
    return render_page(request)


@login_required
@require_POST
def skills_upload(request: AuthedHttpRequest) -> HttpResponse:
    """Install a personal skill from a .zip/.skill file or a folder; shows the lint report."""
    if not settings.ALLOW_PERSONAL_SKILLS:
        return render_page(
            request,
            status=403,
            upload_error="Personal skills are turned off on this server; ask an administrator.",
        )
    archive = request.FILES.get("archive")
    folder = request.FILES.getlist("folder")
    try:
        if archive is not None and not folder:
            results = uploads.install_archive(
                read_upload(archive), archive.name or "upload.zip", user=request.user, personal=True
            )
        elif folder and archive is None:
            results = uploads.install_files(
                folder_files(folder, request.POST.get("paths", "")),
                user=request.user,
                personal=True,
            )
        else:
            raise uploads.UploadError(
                "choose either a .zip/.skill file or a folder, then press Upload"
            )
    except uploads.UploadError as exc:
        return render_page(request, status=400, upload_error=exc.message, problems=exc.problems)
    return render_page(request, results=results)


@login_required
@require_POST
def package_enable(request: AuthedHttpRequest, pk: int) -> HttpResponse:
    """Enable or disable one of the user's personal packages."""
    package = _get_package_for_user(request, pk)
    versions.set_enabled(package, request.POST.get("enabled") == "1")
    return redirect("skills-page")


@login_required
@require_POST
def package_delete(request: AuthedHttpRequest, pk: int) -> HttpResponse:
    """Delete one of the user's personal packages (disabled instead if a conversation used it)."""
    package = _get_package_for_user(request, pk)
    message = versions.delete_package(package)
    return render_page(request, notice=message)
