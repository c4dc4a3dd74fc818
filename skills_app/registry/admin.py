"""The admin of uploaded skills: packages (list, actions, the change page with its versions) and
versions (read-only); the package's own pages (upload, activate, diff) are in `admin_pages.py`."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.models import DELETION, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse

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
from skills_app.registry import versions
from skills_app.registry.admin_pages import PackagePages, lint_rows
from skills_app.registry.trigger_report import figures, latest_by_version


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


@admin.register(SkillPackage)
class SkillPackageAdmin(PackagePages):
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
        versions.set_enabled(obj, obj.enabled)

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
            outcome = sentence(versions.delete_package(package), name=package.name)
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
            versions.set_enabled(package, enabled)
            self.log_change(request, package, f"{word} the skill.")
        names = ", ".join(p.name for p in packages)
        self.message_user(request, f"{word} {len(packages)} skill(s): {names}.", messages.SUCCESS)

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
                    "warnings": [p for p in lint_rows(v.lint) if p["severity"] != "error"],
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
class SkillVersionAdmin(HiddenFieldsAdmin[SkillVersion], ReadOnlyAdmin[SkillVersion]):
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
