"""Read-only admin views of runs, approvals, skill invocations and the audit trail.

Each admin is a HiddenFieldsAdmin: staff without the inspect permission never see, search,
filter or order by hidden content (adminkit.HIDDEN_FIELDS), and calls are shown filtered.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from skills_app.adminkit import HiddenFieldsAdmin, ReadOnlyAdmin, short_digest
from skills_app.audit.access import can_replay
from skills_app.models import (
    Approval,
    AuditEvent,
    PermissionDecision,
    Run,
    SkillInvocation,
    SkillReview,
)


def deleted_note(conversation: Any) -> str:
    """ "deleted by the owner at …" for a conversation its owner deleted, else ""."""
    if conversation.deleted_at is None:
        return ""
    who = (
        "the owner"
        if conversation.deleted_by_id == conversation.owner_id
        else (conversation.deleted_by.get_username() if conversation.deleted_by else "unknown")
    )
    return f"deleted by {who} at {conversation.deleted_at:%Y-%m-%d %H:%M:%S %Z}"


@admin.register(SkillInvocation)
class SkillInvocationAdmin(HiddenFieldsAdmin[SkillInvocation], ReadOnlyAdmin[SkillInvocation]):
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
        "conversation_state",
    )
    list_filter = ("decision", "caller", "source", "skill", "created_at")
    list_select_related = ("conversation__owner", "conversation__deleted_by")
    search_fields = ("skill", "args", "conversation__owner__username")
    date_hierarchy = "created_at"

    def get_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        # Hidden ones (injected text, commands and output, hooks) are dropped by the mixin.
        return tuple(f.name for f in self.opts.concrete_fields if f.name != "id")

    @admin.display(description="user", ordering="conversation__owner__username")
    def user(self, invocation: SkillInvocation) -> str:
        return invocation.conversation.owner.get_username()

    @admin.display(description="digest", ordering="digest")
    def short_digest(self, invocation: SkillInvocation) -> str:
        return short_digest(invocation.digest)

    @admin.display(description="conversation state")
    def conversation_state(self, invocation: SkillInvocation) -> str:
        return deleted_note(invocation.conversation) or "kept"


@admin.register(Approval)
class ApprovalAdmin(HiddenFieldsAdmin[Approval], ReadOnlyAdmin[Approval]):
    list_display = ("created_at", "conversation", "call_text", "skill", "status", "answered_by")
    list_filter = ("status", "tool", "created_at")
    list_select_related = ("conversation", "answered_by")
    search_fields = ("call_text", "skill")
    date_hierarchy = "created_at"

    def get_list_display(self, request: HttpRequest) -> tuple[str, ...]:
        base = tuple(super().get_list_display(request))
        return (*base, "replay") if can_replay(request.user) else base

    def get_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        fields = tuple(f.name for f in self.opts.concrete_fields if f.name != "id")
        return (*fields, "replay") if can_replay(request.user) else fields

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return self.get_fields(request, obj)

    @admin.display(description="today's rules")
    def replay(self, approval: Approval) -> str:
        url = reverse("admin:skills_app_permissionrule_test") + f"?approval={approval.pk}"
        return format_html('<a class="button" href="{}">Test with today\'s rules</a>', url)


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin[AuditEvent]):
    list_display = ("created_at", "action", "target", "actor_name", "detail")
    list_filter = ("action", "created_at")
    search_fields = ("target", "actor_name")
    date_hierarchy = "created_at"


@admin.register(Run)
class RunAdmin(HiddenFieldsAdmin[Run], ReadOnlyAdmin[Run]):
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


@admin.register(PermissionDecision)
class PermissionDecisionAdmin(
    HiddenFieldsAdmin[PermissionDecision], ReadOnlyAdmin[PermissionDecision]
):
    """The raw table of permission decisions (the audit's decisions page reads better)."""

    list_display = (
        "created_at",
        "conversation",
        "tool",
        "call_text",
        "decision",
        "source",
        "reviewer_name",
    )
    list_filter = ("decision", "source", "tool", "created_at")
    list_select_related = ("conversation",)
    search_fields = ("skill", "rule_text", "reviewer_name")
    date_hierarchy = "created_at"

    def get_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return tuple(f.name for f in self.opts.concrete_fields if f.name != "id")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return self.get_fields(request, obj)


@admin.register(SkillReview)
class SkillReviewAdmin(HiddenFieldsAdmin[SkillReview], ReadOnlyAdmin[SkillReview]):
    """The raw table of review steps (the audit's skill reviews page reads better)."""

    list_display = (
        "created_at",
        "package_name",
        "version_number",
        "action",
        "actor_name",
        "short_digest",
    )
    list_filter = ("action", "created_at")
    search_fields = ("package_name", "actor_name")
    date_hierarchy = "created_at"

    def get_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return tuple(f.name for f in self.opts.concrete_fields if f.name != "id")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return self.get_fields(request, obj)

    def conversation_id_of(self, obj: Any) -> int | None:
        return None  # a review belongs to no conversation

    @admin.display(description="digest", ordering="digest")
    def short_digest(self, step: SkillReview) -> str:
        return short_digest(step.digest)
