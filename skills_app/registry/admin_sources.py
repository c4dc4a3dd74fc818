"""The admin list of bundled and SKILLS_DIRS skills whose source users may read.

Uploaded skills carry the same choice on their package (`SkillPackage.source_visible`). Only
those who may read hidden text may decide to show it: otherwise a staff member could mark a
skill visible and then read its SKILL.md.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from skills_app.adminkit import HiddenFieldsAdmin
from skills_app.models import VisibleSkillSource
from skills_app.visibility import INSPECT_PERMISSION


@admin.register(VisibleSkillSource)
class VisibleSkillSourceAdmin(HiddenFieldsAdmin[VisibleSkillSource]):
    """Bundled and SKILLS_DIRS skills whose files people without the inspect permission may read."""

    list_display = ("name", "note", "author", "created_at")
    search_fields = ("name", "note")
    fields = ("name", "note", "author", "created_at")
    readonly_fields = ("author", "created_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return super().has_add_permission(request) and request.user.has_perm(INSPECT_PERMISSION)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        allowed = super().has_change_permission(request, obj)
        return allowed and request.user.has_perm(INSPECT_PERMISSION)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        allowed = super().has_delete_permission(request, obj)
        return allowed and request.user.has_perm(INSPECT_PERMISSION)

    def save_model(
        self, request: HttpRequest, obj: VisibleSkillSource, form: Any, change: bool
    ) -> None:
        obj.author_id = request.user.pk
        super().save_model(request, obj, form, change)
