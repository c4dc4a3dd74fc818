"""The admin of skill sources (Git): add one, sync it now, read what each sync did.

Only people who may install organisation skills (the Skill manager role's upload permission)
manage sources: a source's skills become versions exactly as an upload's would.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html

from skills_app.core.gitsource import GitSourceError
from skills_app.models import SkillSource, SkillSourceSync
from skills_app.registry import sources
from skills_app.registry.uploads import ORG_PERMISSION


class SkillSourceForm(forms.ModelForm[SkillSource]):
    class Meta:
        model = SkillSource
        fields = ("name", "url", "branch", "path", "owner", "enabled", "sync_interval_minutes")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        try:
            sources.check_source_fields(
                cleaned.get("url") or "", cleaned.get("branch") or "", cleaned.get("path") or ""
            )
        except GitSourceError as exc:
            raise forms.ValidationError(exc.message) from None
        return cleaned


class SyncInline(admin.TabularInline[SkillSourceSync, SkillSource]):
    model = SkillSourceSync
    extra = 0
    can_delete = False
    max_num = 0
    fields = ("started_at", "trigger", "started_by", "short_commit", "status", "message")
    readonly_fields = fields
    ordering = ("-started_at",)

    @admin.display(description="commit")
    def short_commit(self, obj: SkillSourceSync) -> str:
        return obj.commit[:12]

    def get_queryset(self, request: HttpRequest) -> QuerySet[SkillSourceSync]:
        return super().get_queryset(request).select_related("started_by")

    # The syncs are the source's history: read by whoever manages sources, written by syncs only.
    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.has_perm(ORG_PERMISSION))

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(SkillSource)
class SkillSourceAdmin(admin.ModelAdmin[SkillSource]):
    form = SkillSourceForm
    list_display = ("name", "url", "branch", "path", "scope", "last_status", "last_synced_at")
    list_filter = ("last_status", "enabled")
    search_fields = ("name", "url")
    readonly_fields = (
        "last_commit",
        "last_synced_at",
        "last_status",
        "last_message",
        "sync_button",
    )
    fields = (
        "name",
        "url",
        "branch",
        "path",
        "owner",
        "enabled",
        "sync_interval_minutes",
        "last_commit",
        "last_synced_at",
        "last_status",
        "last_message",
        "sync_button",
    )
    inlines = [SyncInline]
    actions = ["sync_now"]

    # Managing sources is installing skills: the Skill manager role's upload permission decides
    # (the roles' permission lists stay as their migration made them).
    def has_module_permission(self, request: HttpRequest) -> bool:
        return (
            request.user.is_active
            and request.user.is_staff
            and request.user.has_perm(ORG_PERMISSION)
        )

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return self.has_module_permission(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)

    @admin.display(description="scope")
    def scope(self, obj: SkillSource) -> str:
        return f"personal ({obj.owner})" if obj.owner_id else "organisation-wide"

    @admin.display(description="sync")
    def sync_button(self, obj: SkillSource) -> str:
        if obj.pk is None:
            return "Save the source first."
        url = reverse("admin:skills_app_skillsource_sync", args=[obj.pk])
        # It submits the change form (with its CSRF token) to the sync view, which reads
        # nothing else from it: unsaved edits are not saved by syncing.
        return format_html(
            '<button type="submit" formaction="{}" formmethod="post" id="sync-now">Sync now</button>'
            ' <span class="help">fetches the branch and makes a new version of each changed skill'
            "</span>",
            url,
        )

    def get_urls(self) -> list[URLPattern]:
        own = [
            path(
                "<int:pk>/sync/",
                self.admin_site.admin_view(self.sync_view),
                name="skills_app_skillsource_sync",
            )
        ]
        return own + super().get_urls()

    def _may_sync(self, request: HttpRequest, obj: SkillSource) -> bool:
        return self.has_change_permission(request, obj)

    def sync_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        """Sync now (POST only): the admin's button."""
        source = get_object_or_404(SkillSource, pk=pk)
        if request.method != "POST":
            return HttpResponseRedirect(reverse("admin:skills_app_skillsource_change", args=[pk]))
        if not self._may_sync(request, source):
            raise PermissionDenied("You may not sync this source.")
        self._report(request, sources.sync_source(source, trigger="admin", user=request.user))
        return HttpResponseRedirect(reverse("admin:skills_app_skillsource_change", args=[pk]))

    @admin.action(description="Sync the selected sources now")
    def sync_now(self, request: HttpRequest, queryset: QuerySet[SkillSource]) -> None:
        for source in queryset:
            if self._may_sync(request, source):
                self._report(
                    request, sources.sync_source(source, trigger="admin", user=request.user)
                )

    def _report(self, request: HttpRequest, record: SkillSourceSync) -> None:
        level = messages.ERROR if record.status == SkillSource.Status.FAILED else messages.SUCCESS
        commit = f" at {record.commit[:12]}" if record.commit else ""
        text = f"{record.source.name}{commit}: {record.get_status_display()}. {record.message}"
        self.message_user(request, text, level)

    def save_model(self, request: HttpRequest, obj: SkillSource, form: Any, change: bool) -> None:
        if not change:
            obj.created_by_id = request.user.pk
        super().save_model(request, obj, form, change)
