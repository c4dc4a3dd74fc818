"""The pages of the review: uploading for everyone, the review of a version, a skill's page.

- `/skills/org/upload/`: skill managers upload an organisation skill (zip, `.skill` or a
  folder); the lint report shows at once, and the draft can be submitted from there;
- `/skills/versions/<id>/review/`: the review page of one organisation version (skill managers
  and the version's uploader), its files in pages (`?page=N`); its form takes the steps:
  submit, approve, request changes, make active (a rollback when the version is older than
  the active one);
- `/skills/s/<name>/`: the page of a skill for everyone who may use it: what it is for, who
  published and reviewed it, what it may run in words, and what the rules say for them.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.text import capfirst
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from skills_app.http import AuthedHttpRequest
from skills_app.models import PermissionDecision, SkillVersion
from skills_app.permissions.approvals import admin_rules
from skills_app.permissions.outlook import outlooks
from skills_app.registry import catalog, review, uploads
from skills_app.registry.review_page import review_context
from skills_app.registry.skills import skills_for_user
from skills_app.registry.trigger_report import activation_comparison
from skills_app.registry.upload_files import folder_files, read_upload
from skills_app.skills.views import render_page
from skills_app.visibility import Outbound, can_inspect, outbound

STEPS = ("submit", "approve", "request_changes", "activate")
DONE_WORDS = {
    "submit": "Submitted for review.",
    "approve": "Approved, with the command manifest you were shown.",
    "request_changes": "Sent back to the author with your comments.",
    "activate": "It is now the active version for everyone.",
}


def _get_version_for_reviewer(request: AuthedHttpRequest, pk: int) -> SkillVersion:
    """An organisation version for a skill manager or its uploader; 404 for anyone else."""
    version = (
        SkillVersion.objects.select_related("package", "uploaded_by")
        .filter(pk=pk, package__owner__isnull=True)
        .first()
    )
    if version is None or not (
        review.may_manage(request.user) or version.uploaded_by_id == request.user.pk
    ):
        raise Http404("No such skill version.")
    return version


def _review_page(
    request: AuthedHttpRequest, version: SkillVersion, *, status: int = 200, **extra: Any
) -> HttpResponse:
    # The version's uploader who is not (or no longer) a skill manager reads their own upload,
    # not the other versions a diff would show (later ones are others' work).
    others = review.may_manage(request.user)
    context = {
        **review_context(version, request.user, page=_page_number(request), others=others),
        # This version's trigger-test figures beside the active version's.
        "trigger": activation_comparison(version.package, version),
        "author_only": not others,
        **extra,
    }
    context["refusals"] = shown_refusals(context["refusals"], request.user)
    return render(request, "skills_app/skills/review.html", context, status=status)


def _page_number(request: AuthedHttpRequest) -> int:
    """The page of files asked for (`?page=N`); the first for anything that is not a number."""
    raw = request.GET.get("page", "1")
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 7 else 1


def shown_refusals(rows: list[PermissionDecision], user: Any) -> list[dict[str, Any]]:
    """Refused calls as the reviewer may read them. A call is refused because it quoted hidden
    text of its conversation, which need not be this skill's (another skill, the owner's
    personal skill, `!` output): each goes through its conversation's outbound filter, for a
    viewer who is not its owner, unless the reviewer may inspect injected content."""
    inspects = can_inspect(user)
    filters: dict[int, Outbound] = {}
    shown = []
    for row in rows:
        out = filters.setdefault(
            row.conversation_id,
            outbound(row.conversation_id, can_inspect=inspects, viewer_id=user.pk),
        )
        shown.append({"row": row, "call": out.text(row.call_text)})
    return shown


@login_required
@require_http_methods(["GET", "POST"])
def review_version(request: AuthedHttpRequest, pk: int) -> HttpResponse:
    """The review page of one version; POST takes one step of its review."""
    version = _get_version_for_reviewer(request, pk)
    if request.method == "GET":
        return _review_page(request, version)
    step = request.POST.get("action", "")
    comment = request.POST.get("comment", "")
    try:
        if step == "submit":
            review.submit(version, request.user, comment=comment)
        elif step == "approve":
            review.approve(
                version,
                request.user,
                manifest_digest=request.POST.get("manifest", ""),
                comment=comment,
            )
            if request.POST.get("activate") == "1":
                version.refresh_from_db()
                review.activate(version, request.user)
                step = "activate"
        elif step == "request_changes":
            review.request_changes(version, request.user, comment=comment)
        elif step == "activate":
            review.activate(version, request.user)
        else:
            raise review.ReviewError(f"Unknown step {step!r}; use one of {', '.join(STEPS)}.")
    except review.ReviewError as exc:
        version.refresh_from_db()
        return _review_page(request, version, status=400, error=exc.message, comment=comment)
    # Redirect after the step, so a reload does not take it again.
    messages.success(request, DONE_WORDS[step])
    return redirect("skill-review", pk=version.pk)


@login_required
@require_POST
def org_upload(request: AuthedHttpRequest) -> HttpResponse:
    """Upload an organisation skill as a draft (skill managers); optionally submit it at once."""
    if not request.user.has_perm(uploads.ORG_PERMISSION):
        raise Http404("No such page.")
    archive = request.FILES.get("archive")
    folder = request.FILES.getlist("folder")
    try:
        if archive is not None and not folder:
            results = uploads.install_archive(
                read_upload(archive), archive.name or "upload.zip", user=request.user
            )
        elif folder and archive is None:
            files = folder_files(folder, request.POST.get("paths", ""))
            results = uploads.install_files(files, user=request.user)
        else:
            raise uploads.UploadError(
                "choose either a .zip/.skill file or a folder, then press Upload"
            )
        submitted = []
        if request.POST.get("submit") == "1":
            for result in results:
                if result.version.review_status in (
                    SkillVersion.DRAFT,
                    SkillVersion.CHANGES_REQUESTED,
                ):
                    review.submit(result.version, request.user)
                    submitted.append(result.version.pk)
    except uploads.UploadError as exc:
        return render_page(request, status=400, org_error=exc.message, org_problems=exc.problems)
    except review.ReviewError as exc:
        return render_page(request, status=400, org_error=exc.message)
    # Redirect after the upload (the version's page; the review queue for several skills), so
    # a reload does not send the files again and the address can be bookmarked.
    for result in results:
        messages.success(request, upload_words(result, submitted=result.version.pk in submitted))
    # With a fragment of its own: the form's (#org-upload) would otherwise carry over.
    if len(results) == 1:
        return redirect(reverse("skill-review", args=[results[0].version.pk]) + "#review")
    return redirect(reverse("skills-page") + "#review-queue")


def upload_words(result: uploads.InstallResult, *, submitted: bool) -> str:
    """What an organisation upload did, in one notice for the page it leads to."""
    words = [capfirst(result.message) + "." if result.created else f"No change: {result.message}."]
    if submitted:
        words.append("Submitted for review.")
    count = len(result.warnings)
    if count:
        things = "thing" if count == 1 else "things"
        words.append(f"Lint found {count} {things} to look at (listed under Lint).")
    else:
        words.append("Lint found nothing to fix.")
    return " ".join(words)


@login_required
@require_GET
def skill_detail(request: AuthedHttpRequest, name: str) -> HttpResponse:
    """The page of one skill, for anyone it is offered to (never its body)."""
    spec = skills_for_user(request.user.pk).get(name)
    if spec is None:
        raise Http404("No such skill.")
    prov = catalog.provenance(spec, request.user.pk)
    manifest = catalog.manifest_for(spec, prov)
    version = prov.version
    reviewer_view = version is not None and review.may_manage(request.user)
    can_read = can_inspect(request.user) or reviewer_view or spec.source == "personal"
    entries = catalog.words_for_user(spec, manifest, can_read=can_read)
    for item in entries:
        item["runs"] = catalog.consented_words(item["entry"], prov)
    access = catalog.access(
        name,
        catalog.rules_context(admin_rules(request.user.pk)),
        model_invocable=spec.model_invocable,
    )
    return render(
        request,
        "skills_app/skills/skill.html",
        {
            "spec": spec,
            "prov": prov,
            "access": access,
            "outlook": outlooks([spec], request.user.pk, {name: access})[name],
            "entries": entries,
            "show_exact": can_read,
            "review_url": reverse("skill-review", args=[version.pk])
            if reviewer_view and version is not None and version.package.owner_id is None
            else "",
        },
    )


__all__ = ["org_upload", "review_version", "skill_detail", "upload_words"]
