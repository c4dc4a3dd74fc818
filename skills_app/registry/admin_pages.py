"""The skill package admin's own pages: upload (with the lint report), activate a version (a
rollback or a roll forward, through the review for organisation skills), and the SKILL.md diff
between two versions (hidden content: only for those who may inspect it, or a visible source).

`PackagePages` is the base of `admin.SkillPackageAdmin`, which adds the list and the change page.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from skills_app.adminkit import HiddenFieldsAdmin, sentence, short_digest
from skills_app.models import SkillPackage, SkillVersion
from skills_app.registry import review, uploads, versions
from skills_app.registry.forms import SkillUploadForm
from skills_app.registry.trigger_report import activation_comparison


def lint_rows(lint: Any) -> list[dict[str, Any]]:
    """A stored lint report as dicts with severity, rule, file, line and message."""
    rows: list[dict[str, Any]] = []
    for item in lint or []:
        if isinstance(item, dict):
            rows.append(
                {
                    "severity": item.get("severity", ""),
                    "rule": item.get("rule", ""),
                    "file": item.get("file", ""),
                    "line": item.get("line"),
                    "message": item.get("message", ""),
                }
            )
        else:
            rows.append(
                {
                    "severity": getattr(item, "severity", ""),
                    "rule": getattr(item, "rule", ""),
                    "file": getattr(item, "file", ""),
                    "line": getattr(item, "line", None),
                    "message": getattr(item, "message", str(item)),
                }
            )
    return rows


class PackagePages(HiddenFieldsAdmin[SkillPackage]):
    """Upload, activate and diff pages of the package admin, at URLs beside its own."""

    def _url(self, name: str, *args: Any) -> str:
        return reverse(
            f"admin:{self.opts.app_label}_{self.opts.model_name}_{name}",
            args=args,
            current_app=self.admin_site.name,
        )

    def get_urls(self) -> list[URLPattern]:
        prefix = f"{self.opts.app_label}_{self.opts.model_name}"
        wrap = self.admin_site.admin_view
        return [
            path("upload/", wrap(self.upload_view), name=f"{prefix}_upload"),
            path(
                "<int:object_id>/activate/<int:version_id>/",
                wrap(self.activate_view),
                name=f"{prefix}_activate",
            ),
            path("<int:object_id>/diff/", wrap(self.diff_view), name=f"{prefix}_diff"),
            *super().get_urls(),
        ]

    def _context(self, request: HttpRequest, title: str, **extra: Any) -> dict[str, Any]:
        return {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": title,
            **extra,
        }

    def upload_view(self, request: HttpRequest) -> HttpResponse:
        """Upload an archive or a folder; show the lint report, or what was installed."""
        if not self.has_add_permission(request):
            raise PermissionDenied
        results: list[Any] = []
        error: Any = None
        if request.method == "POST":
            form = SkillUploadForm(request.POST, request.FILES)
            if form.is_valid():
                try:
                    results = self._install(request, form.cleaned_data)
                except uploads.UploadError as exc:
                    error = exc
                else:
                    for result in results:
                        self._record_upload(request, result)
                    form = SkillUploadForm()
        else:
            form = SkillUploadForm()
        reports = [
            {
                "result": result,
                "warnings": lint_rows(result.warnings),
                "url": self._url("change", result.package.pk),
                "review_url": reverse("skill-review", args=[result.version.pk])
                if result.package.owner_id is None
                else "",
                # A changed description is worth measuring before (or just after) it goes live.
                "trigger_url": reverse("triggers-package", args=[result.package.pk])
                + f"?version={result.version.pk}#run",
            }
            for result in results
        ]
        context = self._context(
            request,
            "Upload skill",
            form=form,
            reports=reports,
            error=error,
            # after "Upload rejected:", so no capital
            error_text=sentence(error.message, capital=False) if error else "",
            error_problems=lint_rows(getattr(error, "problems", [])),
            has_file_field=True,
        )
        return TemplateResponse(request, "admin/skills_app/skillpackage/upload.html", context)

    def _install(self, request: HttpRequest, data: dict[str, Any]) -> list[Any]:
        personal = bool(data.get("personal"))
        activate = not data.get("candidate")
        archive = data.get("archive")
        if archive:
            return uploads.install_archive(
                archive.read(),
                archive.name,
                user=request.user,
                personal=personal,
                activate=activate,
            )
        files = [
            uploads.UploadFile(path=relative, data=upload.read())
            for relative, upload in zip(data["folder_paths"], data["folder"], strict=True)
        ]
        return uploads.install_files(files, user=request.user, personal=personal, activate=activate)

    def _record_upload(self, request: HttpRequest, result: Any) -> None:
        version = result.version
        if result.created:
            self.log_change(
                request,
                result.package,
                f"Uploaded version {version.number} ({short_digest(version.digest)}).",
            )
        level = messages.SUCCESS if result.created else messages.INFO
        self.message_user(request, sentence(result.message, name=result.package.name), level)

    def _package_for_change(self, request: HttpRequest, object_id: int) -> SkillPackage:
        package = self.get_object(request, str(object_id))
        if package is None:
            raise Http404("No such skill package.")
        if not self.has_change_permission(request, package):
            raise PermissionDenied
        return package

    def activate_view(self, request: HttpRequest, object_id: int, version_id: int) -> HttpResponse:
        """Make one version the active one: a rollback or a roll forward. GET shows the version's
        trigger tests beside the active version's first, and the button."""
        if request.method not in ("GET", "POST"):
            return HttpResponseNotAllowed(["GET", "POST"])
        package = self._package_for_change(request, object_id)
        version = get_object_or_404(SkillVersion, pk=version_id, package=package)
        if request.method == "GET":
            return self._activation_page(request, package, version)
        try:
            if package.owner_id is None:
                # Organisation versions go live only approved, through the review.
                review.activate(version, request.user)
            else:
                versions.activate_version(version)
        except (uploads.UploadError, review.ReviewError) as exc:
            self.message_user(request, sentence(exc.message), messages.ERROR)
            return redirect(self._url("change", package.pk))
        self.log_change(
            request,
            package,
            f"Activated version {version.number} ({short_digest(version.digest)}).",
        )
        self.message_user(
            request,
            f'"{package.name}" now uses version {version.number} ({short_digest(version.digest)}).',
            messages.SUCCESS,
        )
        return redirect(self._url("change", package.pk))

    def _activation_page(
        self, request: HttpRequest, package: SkillPackage, version: SkillVersion
    ) -> HttpResponse:
        context = self._context(
            request,
            f"Activate {package.name} v{version.number}?",
            package=package,
            original=package,
            version=version,
            active=package.active_version,
            comparison=activation_comparison(package, version),
            review_url=reverse("skill-review", args=[version.pk])
            if package.owner_id is None
            else "",
            needs_review=package.owner_id is None and version.review_status != version.APPROVED,
            activate_url=self._url("activate", package.pk, version.pk),
            change_url=self._url("change", package.pk),
            trigger_url=reverse("triggers-package", args=[package.pk])
            + f"?version={version.pk}#run",
        )
        return TemplateResponse(request, "admin/skills_app/skillpackage/activate.html", context)

    def diff_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        """SKILL.md of one version against another (default: the previous one against the newest)."""
        package = self.get_object(request, str(object_id))
        if package is None:
            raise Http404("No such skill package.")
        if not self.has_view_or_change_permission(request, package):
            raise PermissionDenied
        if not (package.source_visible or self.inspects(request)):
            # SKILL.md is hidden content: the diff quotes it.
            raise PermissionDenied(
                "Comparing versions shows SKILL.md, which needs the permission to inspect "
                "injected content (or the skill's source marked visible to users)."
            )
        numbered = list(package.versions.order_by("-number"))
        if len(numbered) < 2 and not request.GET:
            raise Http404("This skill has only one version; there is nothing to compare.")
        by_id = {str(v.pk): v for v in numbered}
        older = by_id.get(request.GET.get("a", "")) or numbered[min(1, len(numbered) - 1)]
        newer = by_id.get(request.GET.get("b", "")) or numbered[0]
        context = self._context(
            request,
            f"{package.name}: SKILL.md v{older.number} → v{newer.number}",
            package=package,
            original=package,
            older=older,
            newer=newer,
            versions=numbered,
            lines=versions.skill_md_diff(older, newer),
            change_url=self._url("change", package.pk),
        )
        return TemplateResponse(request, "admin/skills_app/skillpackage/diff.html", context)
