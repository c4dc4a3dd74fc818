"""The admin of uploaded skills: packages with upload, versions, diff and rollback."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.models import DELETION, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from skills_app.adminkit import (
    HiddenFieldsAdmin,
    ReadOnlyAdmin,
    sentence,
    short_digest,
    signed_in_user,
)
from skills_app.models import (
    SkillPackage,
    SkillVersion,
)
from skills_app.registry import review, uploads
from skills_app.registry.forms import SkillUploadForm
from skills_app.triggers.report import activation_comparison, figures, latest_by_version


def _problems(lint: Any) -> list[dict[str, Any]]:
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


class ScopeFilter(admin.SimpleListFilter):
    title = "scope"
    parameter_name = "scope"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("org", "organisation-wide"), ("personal", "personal")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "org":
            return queryset.filter(owner__isnull=True)
        if self.value() == "personal":
            return queryset.filter(owner__isnull=False)
        return queryset


@dataclass(frozen=True, slots=True)
class DiffLine:
    kind: str  # add | del | hunk | file | same
    text: str


def diff_lines(diff: str) -> list[DiffLine]:
    """Classify unified-diff lines so the template can colour them (the text stays escaped)."""
    lines: list[DiffLine] = []
    for line in diff.splitlines():
        if line.startswith(("+++", "---")):
            kind = "file"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "same"
        lines.append(DiffLine(kind, line))
    return lines


@admin.register(SkillPackage)
class SkillPackageAdmin(HiddenFieldsAdmin, admin.ModelAdmin):
    list_display = ("name", "scope", "active", "enabled", "source_visible", "updated_at")
    list_filter = ("enabled", "source_visible", ScopeFilter)
    list_select_related = ("owner", "active_version")
    search_fields = ("name", "owner__username")
    actions = ("enable_packages", "disable_packages", "delete_packages")
    fields = (
        "name",
        "scope",
        "active",
        "enabled",
        "source_visible",
        "trigger_gate",
        "created_at",
        "updated_at",
    )
    readonly_fields = ("name", "scope", "active", "created_at", "updated_at")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        readonly = tuple(super().get_readonly_fields(request, obj))
        # Showing a skill's source to users is for those who may read it themselves; otherwise
        # a staff member could turn it on and read SKILL.md in the version admin.
        if not self.inspects(request):
            readonly += ("source_visible",)
        return readonly

    @admin.display(description="scope", ordering="owner__username")
    def scope(self, package: SkillPackage) -> str:
        if package.owner is None:
            return "organisation"
        return f"personal: {package.owner.get_username()}"

    @admin.display(description="active version", ordering="active_version__number")
    def active(self, package: SkillPackage) -> str:
        version = package.active_version
        if version is None:
            return "—"
        return f"v{version.number} · {short_digest(version.digest)}"

    # -- permissions: packages come from uploads; deleting goes through the service, which keeps
    # the versions a conversation used (the audit points at them) and disables the package instead.

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_remove_permission(self, request: HttpRequest) -> bool:
        return super().has_delete_permission(request)

    def add_view(
        self, request: HttpRequest, form_url: str = "", extra_context: Any = None
    ) -> HttpResponse:
        return redirect(self._url("upload"))

    def save_model(self, request: HttpRequest, obj: SkillPackage, form: Any, change: bool) -> None:
        # Only `enabled` and `source_visible` are editable; the service also drops cached
        # registries. The save moves updated_at, so cached hidden-text indexes are rebuilt.
        if "source_visible" in form.changed_data:
            obj.save(update_fields=["source_visible", "updated_at"])
        uploads.set_enabled(obj, obj.enabled)

    # -- actions ------------------------------------------------------------------------

    @admin.action(description="Enable the selected skills", permissions=["change"])
    def enable_packages(self, request: HttpRequest, queryset: QuerySet[SkillPackage]) -> None:
        self._set_enabled(request, queryset, True)

    @admin.action(description="Disable the selected skills", permissions=["change"])
    def disable_packages(self, request: HttpRequest, queryset: QuerySet[SkillPackage]) -> None:
        self._set_enabled(request, queryset, False)

    @admin.action(
        description="Delete the selected skills (disabled instead if a conversation used them)",
        permissions=["remove"],
    )
    def delete_packages(self, request: HttpRequest, queryset: QuerySet[SkillPackage]) -> None:
        for package in list(queryset):
            pk, name = package.pk, str(package)
            outcome = sentence(uploads.delete_package(package), name=package.name)
            if SkillPackage.objects.filter(pk=pk).exists():
                self.log_change(request, package, outcome)
            else:
                LogEntry.objects.create(
                    user=signed_in_user(request),
                    content_type=ContentType.objects.get_for_model(SkillPackage),
                    object_id=str(pk),
                    object_repr=name,
                    action_flag=DELETION,
                    change_message=outcome,
                )
            self.message_user(request, outcome, messages.SUCCESS)

    def _set_enabled(
        self, request: HttpRequest, queryset: QuerySet[SkillPackage], enabled: bool
    ) -> None:
        word = "Enabled" if enabled else "Disabled"
        packages = list(queryset)
        for package in packages:
            uploads.set_enabled(package, enabled)
            self.log_change(request, package, f"{word} the skill.")
        names = ", ".join(p.name for p in packages)
        self.message_user(request, f"{word} {len(packages)} skill(s): {names}.", messages.SUCCESS)

    # -- extra pages --------------------------------------------------------------------

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
                "warnings": _problems(result.warnings),
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
            error_problems=_problems(getattr(error, "problems", [])),
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
                uploads.activate_version(version)
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
        versions = list(package.versions.order_by("-number"))
        if len(versions) < 2 and not request.GET:
            raise Http404("This skill has only one version; there is nothing to compare.")
        by_id = {str(v.pk): v for v in versions}
        older = by_id.get(request.GET.get("a", "")) or versions[min(1, len(versions) - 1)]
        newer = by_id.get(request.GET.get("b", "")) or versions[0]
        diff = uploads.skill_md_diff(older, newer)
        context = self._context(
            request,
            f"{package.name}: SKILL.md v{older.number} → v{newer.number}",
            package=package,
            original=package,
            older=older,
            newer=newer,
            versions=versions,
            lines=diff_lines(diff),
            change_url=self._url("change", package.pk),
        )
        return TemplateResponse(request, "admin/skills_app/skillpackage/diff.html", context)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        package = self.get_object(request, object_id)
        # New packages come from the upload page, never from this form.
        extra = {"show_save_and_add_another": False, **(extra_context or {})}
        if package is not None:
            versions = list(package.versions.select_related("uploaded_by").order_by("-number"))
            tested = latest_by_version(package.pk)
            extra["versions"] = [
                {
                    "version": v,
                    "active": v.pk == package.active_version_id,
                    "warnings": [p for p in _problems(v.lint) if p["severity"] != "error"],
                    "activate_url": self._url("activate", package.pk, v.pk),
                    "review_url": reverse("skill-review", args=[v.pk])
                    if package.owner_id is None
                    else "",
                    "trigger": figures(tested[v.pk]) if v.pk in tested else None,
                    "trigger_url": reverse("triggers-package", args=[package.pk])
                    + f"?version={v.pk}#run",
                }
                for v in versions
            ]
            extra["diff_url"] = self._url("diff", package.pk)
            extra["can_activate"] = self.has_change_permission(request, package)
        return super().change_view(request, object_id, form_url, extra_context=extra)


@admin.register(SkillVersion)
class SkillVersionAdmin(HiddenFieldsAdmin, ReadOnlyAdmin):
    list_display = (
        "package",
        "number",
        "short_digest",
        "review_status",
        "uploaded_by",
        "short_commit",
        "created_at",
    )
    list_filter = ("review_status", "package")
    list_select_related = ("package", "uploaded_by")

    @admin.display(description="from commit")
    def short_commit(self, version: SkillVersion) -> str:
        return version.source_commit[:12]

    search_fields = ("package__name", "digest")
    fields = (
        "package",
        "number",
        "digest",
        "review_status",
        "uploaded_by",
        "source",
        "source_commit",
        "created_at",
        "storage_path",
        "frontmatter",
        "lint",
        "skill_md",
    )

    @admin.display(description="digest", ordering="digest")
    def short_digest(self, version: SkillVersion) -> str:
        return short_digest(version.digest)

    def hidden_fields_for(self, obj: Any) -> frozenset[str]:
        if obj is not None and obj.package.source_visible:
            return frozenset()  # an admin chose to show this skill's source to users
        return super().hidden_fields_for(obj)
