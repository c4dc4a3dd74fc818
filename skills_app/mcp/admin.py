"""The admin of MCP servers and their tool definitions: adding a server, who sees it, the review.

"Add MCP server" registers one through the checks and audit rows of `manage.py mcp add`
(`servers.register`); its argv or URL is then its identity and is not edited. Header and env
values are write-only: no page shows them back. A server's page shows the exact argv or URL, the
env keys and header names and every tool; "Connect and list its tools" is `mcp test`. The review
page shows each pending definition whole (description, input schema, annotations, `_meta`) and
approves or rejects exactly what it showed, by another person than the registrant.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html

from skills_app import trail
from skills_app.adminkit import ReadOnlyAdmin, sentence, short_digest, signed_in_user
from skills_app.core.mcp import McpConnectError
from skills_app.mcp import definitions, oauth_grants, servers
from skills_app.mcp.servers import McpSetupError
from skills_app.models import AuditEvent, McpServer, McpToolDefinition

REVIEW_PERMISSION = "skills_app.change_mcptooldefinition"


def _pretty(value: Any) -> str:
    return format_html("<pre>{}</pre>", json.dumps(value, indent=2, sort_keys=True))


class DefinitionInline(admin.TabularInline[McpToolDefinition, McpServer]):
    model = McpToolDefinition
    extra = 0
    can_delete = False
    fields = (
        "kind",
        "tool",
        "status",
        "digest",
        "current",
        "description",
        "schema",
        "reviewed_by_name",
    )
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


class WriteOnlyTextarea(forms.Textarea):
    """A textarea that never renders its value: a secret typed once is not sent back."""

    def format_value(self, value: Any) -> str | None:
        return None


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


class McpServerAddForm(forms.ModelForm[McpServer]):
    """A new server, checked by `servers.check_registration` (the rules of `mcp add`)."""

    kind = forms.ChoiceField(
        label="Kind",
        choices=[
            ("http", "Streamable HTTP: a remote server at a URL"),
            ("stdio", "stdio: a program run in the conversation's sandbox"),
        ],
        widget=forms.RadioSelect,
        initial="http",
    )
    url = forms.CharField(
        label="URL",
        required=False,
        widget=forms.TextInput(attrs={"class": "vURLField"}),
        help_text="For an HTTP server: its full http(s):// address, e.g. "
        "https://wiki-mcp.example.com/mcp.",
    )
    headers = forms.CharField(
        label="Headers",
        required=False,
        widget=WriteOnlyTextarea(attrs={"rows": 3, "autocomplete": "off"}),
        help_text="For an HTTP server: one per line, Name: value. Sent with every request; the "
        "values are never shown again (type them again after an error).",
    )
    argv = forms.CharField(
        label="Command",
        required=False,
        widget=forms.TextInput(attrs={"class": "vURLField"}),
        help_text="For a stdio server: the exact command line in shell words, the program by "
        "its absolute path, e.g. /opt/tickets-mcp/bin/tickets-mcp --stdio.",
    )
    env = forms.CharField(
        label="Environment",
        required=False,
        widget=WriteOnlyTextarea(attrs={"rows": 3, "autocomplete": "off"}),
        help_text="For a stdio server: one per line, KEY=VALUE. The values go to the server's "
        "process only and are never shown again (type them again after an error).",
    )
    read_only_paths = forms.CharField(
        label="Read-only folders",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="For a stdio server: one absolute folder per line that it needs (its "
        "installation, its Python), bound read-only in the sandbox.",
    )
    groups = forms.ModelMultipleChoiceField(
        queryset=Group.objects.order_by("name"),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Members of these groups see the server's tools.",
    )
    everyone = forms.BooleanField(
        required=False, label="Everyone", help_text="Every signed-in person sees its tools."
    )
    oauth = forms.BooleanField(
        required=False,
        label="OAuth sign-in",
        help_text="For an HTTP server: each person signs in to it (OAuth 2.1) and its tools act "
        "with their own token. Leave out an Authorization header.",
    )

    class Meta:
        model = McpServer
        fields = ("name", "display_name")

    def validate_unique(self) -> None:
        pass  # `check_registration` says it in its own words (name and identity)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.errors:
            return data
        try:
            data["env_pairs"] = servers.parse_pairs(_lines(data["env"]), "=", "KEY=VALUE")
            data["header_pairs"] = servers.parse_pairs(_lines(data["headers"]), ":", "Name: value")
            data["argv_words"] = shlex.split(data["argv"])
        except McpSetupError as exc:
            raise forms.ValidationError(sentence(str(exc))) from None
        except ValueError as exc:  # shlex: an open quote
            raise forms.ValidationError(
                f"The command cannot be read as shell words ({exc}); close its quotes."
            ) from None
        try:
            servers.check_registration(**self.registration(data))
        except McpSetupError as exc:
            raise forms.ValidationError(sentence(str(exc))) from None
        return data

    @staticmethod
    def registration(data: dict[str, Any]) -> dict[str, Any]:
        """The arguments of `servers.register` (less who registers) from the cleaned data."""
        return {
            "name": data["name"],
            "kind": data["kind"],
            "argv": data["argv_words"],
            "env": data["env_pairs"],
            "read_only_paths": [p.strip() for p in _lines(data["read_only_paths"])],
            "url": data["url"].strip(),
            "headers": data["header_pairs"],
            "groups": [g.name for g in data["groups"]],
            "auth": "oauth" if data.get("oauth") else "",
        }


ADD_FIELDS = (
    "name",
    "display_name",
    "kind",
    "url",
    "headers",
    "argv",
    "env",
    "read_only_paths",
    "oauth",
    "groups",
    "everyone",
)


class McpServerAdmin(admin.ModelAdmin[McpServer]):
    list_display = ("name", "kind", "where", "env_keys", "audience", "enabled")
    list_filter = ("kind", "enabled")
    # `env` and `headers` are never among the fields: their values stay on the server side.
    fields = (
        "name",
        "display_name",
        "kind",
        "auth",
        "where",
        "env_keys",
        "header_names",
        "read_only_paths",
        "registered_by_name",
        "groups",
        "everyone",
        "enabled",
        "call_cost_usd",
        "tools",
    )
    readonly_fields = (
        "name",
        "kind",
        "auth",
        "where",
        "env_keys",
        "header_names",
        "read_only_paths",
        "registered_by_name",
        "tools",
    )
    filter_horizontal = ("groups",)
    inlines = [DefinitionInline]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Removing a server takes the right to add one (an admin who may bring a server in may
        # take it out); Django's own delete right alone is not enough.
        return self.has_add_permission(request)

    def get_actions(self, request: HttpRequest) -> Any:
        actions = super().get_actions(request)
        # The bulk delete would skip `servers.remove` and its audit row.
        actions.pop("delete_selected", None)
        return actions

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """A page saying what goes with the server and what stays; (POST) `mcp remove`."""
        server = self.get_object(request, unquote(object_id))
        if server is None:
            raise Http404("No such MCP server.")
        if not self.has_delete_permission(request, server):
            raise PermissionDenied("Removing an MCP server takes the right to add one.")
        change_url = reverse("admin:skills_app_mcpserver_change", args=[server.pk])
        if request.method == "POST":
            name = server.name
            servers.remove(server, actor=signed_in_user(request))
            self.message_user(
                request,
                f'Removed "{name}". The audit keeps its calls and records the removal.',
                messages.SUCCESS,
            )
            return HttpResponseRedirect(reverse("admin:skills_app_mcpserver_changelist"))
        calls = AuditEvent.objects.filter(
            action=AuditEvent.MCP_CALLED, detail__server=server.name
        ).count()
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "server": server,
            "where": self.where(server),
            "counts": servers.removal_counts(server),
            "calls": calls,
            "change_url": change_url,
            "title": f"Remove the MCP server {server.name}?",
        }
        return TemplateResponse(request, "admin/skills_app/mcpserver/remove.html", context)

    # -- adding: the form of `mcp add` ------------------------------------------------------

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ADD_FIELDS if obj is None else super().get_fields(request, obj)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return () if obj is None else super().get_readonly_fields(request, obj)

    def get_inlines(self, request: HttpRequest, obj: Any) -> Any:
        return [] if obj is None else super().get_inlines(request, obj)

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> Any:
        if obj is None:
            kwargs["form"] = McpServerAddForm
        return super().get_form(request, obj, change, **kwargs)

    def save_form(self, request: HttpRequest, form: Any, change: bool) -> Any:
        if change:
            return super().save_form(request, form, change)
        # The one entrance of a registration: the same checks again and the mcp.registered row.
        return servers.register(
            registered_by=signed_in_user(request),
            display_name=form.cleaned_data["display_name"],
            everyone=form.cleaned_data["everyone"],
            **McpServerAddForm.registration(form.cleaned_data),
        )

    def save_model(self, request: HttpRequest, obj: McpServer, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)

    def response_add(
        self, request: HttpRequest, obj: McpServer, post_url_continue: str | None = None
    ) -> HttpResponse:
        self.message_user(request, f'Registered "{obj.name}" ({obj.kind}).', messages.SUCCESS)
        self._list_tools(request, obj)
        return HttpResponseRedirect(reverse("admin:skills_app_mcpserver_change", args=[obj.pk]))

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        if not change:
            return  # `servers.register` stored the groups and recorded the registration
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
            call_cost_usd=str(server.call_cost_usd),
        )

    # -- listing and reviewing its tools ---------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        wrap = self.admin_site.admin_view
        return [
            path("<int:pk>/list/", wrap(self.list_view), name="skills_app_mcpserver_list"),
            path("<int:pk>/review/", wrap(self.review_view), name="skills_app_mcpserver_review"),
            *super().get_urls(),
        ]

    @admin.display(description="tools")
    def tools(self, server: McpServer) -> str:
        pending = server.definitions.filter(
            status=McpToolDefinition.Status.PENDING, current=True
        ).count()
        review = reverse("admin:skills_app_mcpserver_review", args=[server.pk])
        # It submits the change form (with its CSRF token) to the list view, which reads
        # nothing else from it.
        return format_html(
            '<button type="submit" formaction="{}" formmethod="post" id="list-tools">'
            "Connect and list its tools</button> "
            '<a href="{}" id="review-link">{} waiting for review</a>',
            reverse("admin:skills_app_mcpserver_list", args=[server.pk]),
            review,
            f"{pending} definition{'' if pending == 1 else 's'}",
        )

    def _list_tools(self, request: HttpRequest, server: McpServer) -> None:
        if server.auth == "oauth":
            # Listing needs a person's token: signing in on the server's page lists the tools.
            self.message_user(
                request,
                f"Each person signs in to {server.name}. Sign in on "
                f"{oauth_grants.sign_in_link(server)}: that lists its tools for review.",
                messages.INFO,
            )
            return
        try:
            with trail.acting(signed_in_user(request)):
                count, report = definitions.list_now(server)
        except McpConnectError as exc:
            self.message_user(
                request,
                f"{exc} Check its address or command, then press “Connect and list its tools” "
                "again.",
                messages.WARNING,
            )
            return
        waiting = [*report.new, *report.changed]
        text = f'"{server.name}" lists {count} tools.'
        if waiting:
            text += (
                f" Waiting for review by another admin than {server.registered_by_name}: "
                f"{', '.join(waiting)}."
            )
        self.message_user(request, text, messages.SUCCESS)

    def list_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        """Connect and list the tools (POST only): `manage.py mcp test`."""
        server = get_object_or_404(McpServer, pk=pk)
        back = HttpResponseRedirect(reverse("admin:skills_app_mcpserver_change", args=[pk]))
        if request.method != "POST":
            return back
        if not self.has_change_permission(request, server):
            raise PermissionDenied("You may not change MCP servers.")
        self._list_tools(request, server)
        return back

    def review_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        """Every pending definition of a server shown whole; approve or reject what was shown."""
        server = get_object_or_404(McpServer, pk=pk)
        if not request.user.has_perm(REVIEW_PERMISSION):
            raise PermissionDenied("You may not review MCP tool definitions.")
        here = reverse("admin:skills_app_mcpserver_review", args=[pk])
        if request.method == "POST":
            shown = request.POST.getlist("definition")
            approve = "approve" in request.POST
            if not shown:
                self.message_user(request, "Tick the definitions to review.", messages.WARNING)
                return HttpResponseRedirect(here)
            try:
                # exactly: when one ticked definition no longer waits as it was shown (the server
                # changed it, or someone reviewed it meanwhile), nothing is reviewed and the
                # page says which, rather than reviewing the rest in silence.
                done = definitions.review(
                    server,
                    approve=approve,
                    reviewer=signed_in_user(request),
                    content_hashes=shown,
                    exactly=True,
                    attest=set(request.POST.getlist("attest")) & set(shown),
                )
            except McpSetupError as exc:
                self.message_user(request, sentence(str(exc)), messages.ERROR)
                return HttpResponseRedirect(here)
            verb = "Approved" if approve else "Rejected"
            text = f"{verb}: {', '.join(done)}." if done else "Nothing of that waits any more."
            attested = server.definitions.filter(
                content_hash__in=request.POST.getlist("attest"),
                hints_attested_by=request.user.pk,
                status=McpToolDefinition.Status.APPROVED,
            )
            if approve and attested.exists():
                tools = ", ".join(sorted({row.tool for row in attested}))
                text += f" Their hints attested: {tools}."
            self.message_user(request, text, messages.SUCCESS)
            return HttpResponseRedirect(here)
        rows = server.definitions.filter(
            status=McpToolDefinition.Status.PENDING, current=True
        ).order_by("tool")
        pending = [
            {
                "row": row,
                "parts": definitions.shown_text(row),
                "problem": definitions.unshowable(row),
                "hints": definitions.hint_words(row),
                "approved_before": server.definitions.filter(
                    kind=row.kind, tool=row.tool, status=McpToolDefinition.Status.APPROVED
                ).exists(),
            }
            for row in rows
        ]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "server": server,
            "pending": pending,
            "own_server": server.registered_by_id == request.user.pk,
            "change_url": reverse("admin:skills_app_mcpserver_change", args=[pk]),
            "title": f"Review the tools of {server.name}",
        }
        return TemplateResponse(request, "admin/skills_app/mcpserver/review.html", context)

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
    list_display = ("tool", "kind", "server", "status", "digest", "current", "reviewed_by_name")
    list_filter = ("kind", "status", "current", "server")
    fields = (
        "server",
        "kind",
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
    # Approving happens on a server's review page, which shows each definition whole; from this
    # list it would name tools the reviewer was not shown. Rejecting lets nothing unread run.
    actions = ["reject"]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Viewing and the review actions; the fields themselves are read-only.
        return bool(request.user.has_perm("skills_app.change_mcptooldefinition"))

    @admin.display(description="hash")
    def digest(self, row: McpToolDefinition) -> str:
        return short_digest(row.content_hash)

    @admin.display(description="input schema")
    def schema(self, row: McpToolDefinition) -> str:
        return _pretty(row.input_schema)

    @admin.display(description="annotations (hints)")
    def annotations_shown(self, row: McpToolDefinition) -> str:
        if row.hints_attested_by_name and definitions.hint_words(row):
            said = f"attested by {row.hints_attested_by_name}"
        else:
            said = "claimed by the server, not attested"
        return format_html("{}<p>{}</p>", _pretty(row.annotations), said)

    @admin.display(description="_meta")
    def meta_shown(self, row: McpToolDefinition) -> str:
        return _pretty(row.meta)

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
                # By its hash: a prompt and a tool may share a name, and only this row was picked.
                done += definitions.review(
                    row.server,
                    approve=approve,
                    reviewer=reviewer,
                    tool=row.tool,
                    content_hashes=[row.content_hash],
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
