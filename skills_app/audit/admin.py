"""Read-only admin views of runs, approvals and skill invocations.

Each admin is a HiddenFieldsAdmin: staff without the inspect permission never see, search,
filter or order by hidden content (adminkit.HIDDEN_FIELDS), and calls are shown filtered.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from skills_app.adminkit import HiddenFieldsAdmin, ReadOnlyAdmin, short_digest
from skills_app.models import (
    Approval,
    Run,
    SkillInvocation,
)


@admin.register(SkillInvocation)
class SkillInvocationAdmin(HiddenFieldsAdmin, ReadOnlyAdmin):
    list_display = (
        "created_at",
        "user",
        "conversation",
        "skill",
        "short_digest",
        "caller",
        "args",
        "decision",
        "decided_by",
    )
    list_filter = ("decision", "caller", "source", "skill", "created_at")
    list_select_related = ("conversation__owner",)
    search_fields = ("skill", "args", "conversation__owner__username")
    date_hierarchy = "created_at"

    def get_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        # Hidden ones (injected text, commands and output, hooks) are dropped by the mixin.
        return [f.name for f in self.opts.concrete_fields if f.name != "id"]

    @admin.display(description="user", ordering="conversation__owner__username")
    def user(self, invocation: SkillInvocation) -> str:
        return invocation.conversation.owner.get_username()

    @admin.display(description="digest", ordering="digest")
    def short_digest(self, invocation: SkillInvocation) -> str:
        return short_digest(invocation.digest)


@admin.register(Approval)
class ApprovalAdmin(HiddenFieldsAdmin, ReadOnlyAdmin):
    list_display = ("created_at", "conversation", "call_text", "skill", "status", "answered_by")
    list_filter = ("status", "tool", "created_at")
    list_select_related = ("conversation", "answered_by")
    search_fields = ("call_text", "skill")
    date_hierarchy = "created_at"


@admin.register(Run)
class RunAdmin(HiddenFieldsAdmin, ReadOnlyAdmin):
    list_display = (
        "id",
        "conversation",
        "status",
        "model_label",
        "is_demo",
        "model_calls",
        "started_at",
        "finished_at",
    )
    list_filter = ("status", "is_demo", "started_at")
    list_select_related = ("conversation",)
    date_hierarchy = "started_at"
