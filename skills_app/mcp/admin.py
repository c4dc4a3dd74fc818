"""The admin of MCP servers and their tool definitions: who sees a server, and the review.

A server is registered with `manage.py mcp add` (its argv or URL is its identity and is not
edited here); this page shows the exact argv or URL, the env keys and header names (never their
values) and every tool with its schema. Pending definitions are approved or rejected here by
another person than the admin who registered the server.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from skills_app import trail
from skills_app.adminkit import ReadOnlyAdmin, sentence, short_digest, signed_in_user
from skills_app.mcp import definitions
from skills_app.mcp.servers import McpSetupError
from skills_app.models import AuditEvent, McpServer, McpToolDefinition


def _pretty(value: Any) -> str:
    return format_html("<pre>{}</pre>", json.dumps(value, indent=2, sort_keys=True))


class DefinitionInline(admin.TabularInline[McpToolDefinition, McpServer]):
    model = McpToolDefinition
    extra = 0
    can_delete = False
    fields = ("tool", "status", "digest", "current", "description", "schema", "reviewed_by_name")
    readonly_fields = fields
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="hash")
    def digest(self, row: McpToolDefinition) -> str:
        return short_digest(row.content_hash)

    @admin.display(description="input schema")
    def schema(self, row: McpToolDefinition) -> str:
        return _pretty(row.input_schema)


class McpServerAdmin(admin.ModelAdmin[McpServer]):
    list_display = ("name", "kind", "where", "env_keys", "audience", "enabled")
    list_filter = ("kind", "enabled")
    # `env` and `headers` are never among the fields: their values stay on the server side.
    fields = (
        "name",
        "display_name",
        "kind",
        "where",
        "env_keys",
        "header_names",
        "read_only_paths",
        "registered_by_name",
        "groups",
        "everyone",
        "enabled",
    )
    readonly_fields = (
        "name",
        "kind",
        "where",
        "env_keys",
        "header_names",
        "read_only_paths",
        "registered_by_name",
    )
    filter_horizontal = ("groups",)
    inlines = [DefinitionInline]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # `manage.py mcp add` checks and records a registration

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # `manage.py mcp remove` records it

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        server = form.instance
        trail.record(
            AuditEvent.MCP_CHANGED,
            target=f"mcp server {server.name}",
            actor=signed_in_user(request),
            groups=sorted(g.name for g in server.groups.all()),
            everyone=server.everyone,
            enabled=server.enabled,
            display_name=server.display_name,
        )

    @admin.display(description="argv or URL")
    def where(self, server: McpServer) -> str:
        return shlex.join(server.argv) if server.kind == "stdio" else server.url

    @admin.display(description="env keys")
    def env_keys(self, server: McpServer) -> str:
        return ", ".join(sorted(server.env)) or "none"

    @admin.display(description="header names")
    def header_names(self, server: McpServer) -> str:
        return ", ".join(sorted(server.headers)) or "none"

    @admin.display(description="seen by")
    def audience(self, server: McpServer) -> str:
        if server.everyone:
            return "everyone"
        return ", ".join(sorted(g.name for g in server.groups.all())) or "nobody"


class McpToolDefinitionAdmin(ReadOnlyAdmin[McpToolDefinition]):
    list_display = ("tool", "server", "status", "digest", "current", "reviewed_by_name")
    list_filter = ("status", "current", "server")
    fields = (
        "server",
        "tool",
        "status",
        "content_hash",
        "current",
        "description",
        "schema",
        "annotations_shown",
        "meta_shown",
        "reviewed_by_name",
        "reviewed_at",
        "first_seen_at",
    )
    readonly_fields = fields
    actions = ["approve", "reject"]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Viewing and the review actions; the fields themselves are read-only.
        return bool(request.user.has_perm("skills_app.change_mcptooldefinition"))

    @admin.display(description="hash")
    def digest(self, row: McpToolDefinition) -> str:
        return short_digest(row.content_hash)

    @admin.display(description="input schema")
    def schema(self, row: McpToolDefinition) -> str:
        return _pretty(row.input_schema)

    @admin.display(description="annotations (unverified hints)")
    def annotations_shown(self, row: McpToolDefinition) -> str:
        return _pretty(row.annotations)

    @admin.display(description="_meta")
    def meta_shown(self, row: McpToolDefinition) -> str:
        return _pretty(row.meta)

    @admin.action(description="Approve the selected pending definitions", permissions=["change"])
    def approve(self, request: HttpRequest, queryset: QuerySet[McpToolDefinition]) -> None:
        self._review(request, queryset, approve=True)

    @admin.action(description="Reject the selected pending definitions", permissions=["change"])
    def reject(self, request: HttpRequest, queryset: QuerySet[McpToolDefinition]) -> None:
        self._review(request, queryset, approve=False)

    def _review(
        self, request: HttpRequest, queryset: QuerySet[McpToolDefinition], *, approve: bool
    ) -> None:
        reviewer = signed_in_user(request)
        done: list[str] = []
        for row in queryset.filter(status=McpToolDefinition.Status.PENDING, current=True):
            try:
                done += definitions.review(
                    row.server, approve=approve, reviewer=reviewer, tool=row.tool
                )
            except McpSetupError as exc:
                self.message_user(request, sentence(str(exc)), messages.ERROR)
        if done:
            verb = "Approved" if approve else "Rejected"
            self.message_user(request, f"{verb}: {', '.join(done)}.", messages.SUCCESS)


def register(site: admin.AdminSite) -> None:
    """Add the MCP pages to the admin site."""
    site.register(McpServer, McpServerAdmin)
    site.register(McpToolDefinition, McpToolDefinitionAdmin)
