"""The admin's MCP pages: what a reviewer sees, and approval by another person only."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from skills_app.core.mcp import ToolDefinition
from skills_app.mcp import definitions, servers
from skills_app.models import AuditEvent, McpServer, McpToolDefinition

pytestmark = pytest.mark.django_db

SCHEMA = {"type": "object", "properties": {"ticket": {"type": "string"}}, "required": ["ticket"]}


@pytest.fixture
def second_admin(django_user_model):
    return django_user_model.objects.create_superuser("lee", password="lee-pass-123")


@pytest.fixture
def server(admin_user):
    server = servers.register(
        name="tickets",
        kind="stdio",
        registered_by=admin_user,
        argv=["/opt/tickets/bin/serve", "--stdio"],
        env={"TICKETS_TOKEN": "tok-value-never-shown"},
        everyone=True,
    )
    definitions.store_listing(
        server,
        [
            ToolDefinition(
                "get_ticket",
                "Read one ticket.",
                SCHEMA,
                annotations={"readOnlyHint": True},
                meta={"vendor": "acme"},
            )
        ],
    )
    return server


def test_the_server_page_shows_the_argv_and_env_keys_never_values(client, admin_user, server):
    client.force_login(admin_user)
    page = client.get(reverse("admin:skills_app_mcpserver_change", args=[server.pk]))
    html = page.content.decode()
    assert page.status_code == 200
    assert "/opt/tickets/bin/serve --stdio" in html and "TICKETS_TOKEN" in html
    assert "tok-value-never-shown" not in html
    assert "get_ticket" in html and "&quot;ticket&quot;" in html  # the tool and its schema


def test_the_definition_page_shows_schema_annotations_and_meta(client, admin_user, server):
    row = McpToolDefinition.objects.get()
    client.force_login(admin_user)
    html = client.get(
        reverse("admin:skills_app_mcptooldefinition_change", args=[row.pk])
    ).content.decode()
    assert "Read one ticket." in html and "&quot;required&quot;" in html
    assert "readOnlyHint" in html and "acme" in html


def test_approval_happens_only_on_the_review_page_and_never_by_the_registrant(
    client, admin_user, second_admin, server
):
    """The list of definitions offers no approval: one from there would name tools the reviewer
    was not shown. On the review page, the registrant's own approval is refused."""
    row = McpToolDefinition.objects.get()
    listing = reverse("admin:skills_app_mcptooldefinition_changelist")
    client.force_login(second_admin)
    client.post(listing, {"action": "approve", "_selected_action": [row.pk]}, follow=True)
    row.refresh_from_db()
    assert row.status == "pending"
    review = reverse("admin:skills_app_mcpserver_review", args=[server.pk])
    client.force_login(admin_user)
    page = client.post(review, {"definition": [row.content_hash], "approve": "1"}, follow=True)
    assert "another person must review its tools" in page.content.decode()
    row.refresh_from_db()
    assert row.status == "pending"
    # Rejecting from the list stays: it lets nothing unread run.
    client.force_login(second_admin)
    page = client.post(listing, {"action": "reject", "_selected_action": [row.pk]}, follow=True)
    assert "Rejected: get_ticket." in page.content.decode()
    row.refresh_from_db()
    assert (row.status, row.reviewed_by_name) == ("rejected", "lee")


def test_changing_who_sees_a_server_is_recorded(client, second_admin, server):
    support = Group.objects.create(name="support")
    client.force_login(second_admin)
    url = reverse("admin:skills_app_mcpserver_change", args=[server.pk])
    inline = client.get(url).context["inline_admin_formsets"][0].formset
    form = {"display_name": "Tickets", "groups": [support.pk], "enabled": "on"}
    form |= {"call_cost_usd": "0.25"}
    form |= {f"{inline.prefix}-{k}": v for k, v in inline.management_form.initial.items()}
    form |= {f"{row.prefix}-id": row.instance.pk for row in inline.forms}
    form |= {f"{row.prefix}-server": server.pk for row in inline.forms}
    assert client.post(url, form).status_code == 302
    server.refresh_from_db()
    assert (list(server.groups.all()), server.everyone) == ([support], False)
    assert server.call_cost_usd == Decimal("0.25")
    event = AuditEvent.objects.get(action="mcp.changed")
    assert event.detail["call_cost_usd"] == "0.25"
    assert (event.actor_name, event.detail["groups"], event.detail["everyone"]) == (
        "lee",
        ["support"],
        False,
    )


def _add_form(**fields):
    form = {"name": "", "display_name": "", "kind": "http", "url": "", "headers": "", "argv": ""}
    form |= {"env": "", "read_only_paths": ""}
    return form | fields


def test_an_admin_adds_an_http_server_through_the_checks_of_mcp_add(client, admin_user):
    support = Group.objects.create(name="support")
    client.force_login(admin_user)
    # Nothing listens on port 9 of loopback: the server is registered, its listing fails.
    form = _add_form(
        name="wiki",
        url="http://127.0.0.1:9/mcp",
        headers="Authorization: Bearer hdr-secret-2f7c91\nX-Team: docs",
        groups=[support.pk],
    )
    page = client.post(reverse("admin:skills_app_mcpserver_add"), form, follow=True)
    html = page.content.decode()
    server = McpServer.objects.get(name="wiki")
    assert (server.kind, server.url, server.registered_by_name) == (
        "http",
        "http://127.0.0.1:9/mcp",
        admin_user.username,
    )
    assert server.headers == {"Authorization": "Bearer hdr-secret-2f7c91", "X-Team": "docs"}
    assert list(server.groups.all()) == [support]
    assert "Registered &quot;wiki&quot; (http)." in html
    assert "&quot;wiki&quot; could not list its tools" in html
    assert "Authorization, X-Team" in html and "hdr-secret-2f7c91" not in html
    event = AuditEvent.objects.get(action="mcp.registered")
    assert (event.actor_name, event.detail["header_names"], event.detail["groups"]) == (
        admin_user.username,
        ["Authorization", "X-Team"],
        ["support"],
    )
    assert "hdr-secret-2f7c91" not in str(event.detail)


def test_bad_input_says_what_to_change_and_never_shows_a_secret_back(client, admin_user):
    client.force_login(admin_user)
    url = reverse("admin:skills_app_mcpserver_add")
    form = _add_form(name="tickets", kind="stdio", argv="serve --stdio", env="TOKEN=env-secret-8d3")
    html = client.post(url, form).content.decode()
    assert "The program &#x27;serve&#x27; must be an absolute path" in html
    assert "env-secret-8d3" not in html
    form = _add_form(name="tickets", kind="stdio", argv="/opt/t/serve", env="SECRET_KEY=x")
    assert "one of Skillscope&#x27;s own settings" in client.post(url, form).content.decode()
    form = _add_form(name="Tickets", url="https://t.example.com/mcp")
    assert "lowercase letters, digits and dashes" in client.post(url, form).content.decode()
    assert not McpServer.objects.exists() and not AuditEvent.objects.exists()


def test_the_review_page_shows_each_definition_whole_and_approves_what_it_showed(
    client, admin_user, second_admin, server
):
    row = McpToolDefinition.objects.get()
    url = reverse("admin:skills_app_mcpserver_review", args=[server.pk])
    client.force_login(admin_user)
    html = client.get(url).content.decode()
    assert "another admin must review its tools" in html
    client.force_login(second_admin)
    html = client.get(url).content.decode()
    assert "Read one ticket." in html and "&quot;required&quot;" in html
    assert "readOnlyHint" in html and "acme" in html
    # A hash the reviewer was not shown (the server changed meanwhile) approves nothing.
    client.post(url, {"definition": ["0" * 64], "approve": "1"})
    row.refresh_from_db()
    assert row.status == "pending"
    page = client.post(url, {"definition": [row.content_hash], "approve": "1"}, follow=True)
    assert "Approved: get_ticket." in page.content.decode()
    row.refresh_from_db()
    assert (row.status, row.reviewed_by_name) == ("approved", "lee")
    event = AuditEvent.objects.get(action="mcp.reviewed")
    assert (event.actor_name, event.detail["content_hash"]) == ("lee", row.content_hash)


def test_a_ticked_definition_that_changed_meanwhile_stops_the_whole_approval(
    client, second_admin, server
):
    """Two definitions shown and ticked; before the POST, the server changes one. Approving the
    other alone would act on a page that no longer holds: nothing is approved, and it says why."""
    definitions.store_listing(
        server,
        [
            ToolDefinition("get_ticket", "Read one ticket.", SCHEMA),
            ToolDefinition("close_ticket", "Close one ticket.", SCHEMA),
        ],
    )
    shown = dict(McpToolDefinition.objects.filter(current=True).values_list("tool", "content_hash"))
    definitions.store_listing(
        server,
        [
            ToolDefinition("get_ticket", "Read one ticket.", SCHEMA),
            ToolDefinition("close_ticket", "Close every ticket.", SCHEMA),
        ],
    )
    url = reverse("admin:skills_app_mcpserver_review", args=[server.pk])
    client.force_login(second_admin)
    page = client.post(url, {"definition": list(shown.values()), "approve": "1"}, follow=True)
    html = page.content.decode()
    assert "Approved" not in html and "close_ticket" in html, html
    assert not McpToolDefinition.objects.filter(status="approved").exists()


def test_a_definition_that_cannot_be_shown_whole_is_not_approved(client, second_admin, server):
    definitions.store_listing(
        server, [ToolDefinition("rename", "Rename a ticket.\u202e.teg ylno", SCHEMA)]
    )
    row = McpToolDefinition.objects.get(tool="rename")
    url = reverse("admin:skills_app_mcpserver_review", args=[server.pk])
    client.force_login(second_admin)
    assert "holds the invisible character U+202E" in client.get(url).content.decode()
    page = client.post(url, {"definition": [row.content_hash], "approve": "1"}, follow=True)
    assert "Not approved, as it cannot be shown whole" in page.content.decode()
    row.refresh_from_db()
    assert row.status == "pending"


def test_an_admin_adds_a_stdio_server_with_its_env_and_read_only_folders(client, admin_user):
    client.force_login(admin_user)
    form = _add_form(
        name="tickets",
        kind="stdio",
        argv="/opt/tickets/bin/serve --mode 'read only'",
        env="TICKETS_TOKEN=env-secret-4b9e1a\nREGION=eu",
        read_only_paths="/usr\n",
        everyone="on",
    )
    page = client.post(reverse("admin:skills_app_mcpserver_add"), form, follow=True)
    server = McpServer.objects.get(name="tickets")
    assert server.argv == ["/opt/tickets/bin/serve", "--mode", "read only"]
    assert server.env == {"TICKETS_TOKEN": "env-secret-4b9e1a", "REGION": "eu"}
    assert (server.read_only_paths, server.everyone) == (["/usr"], True)
    html = page.content.decode()
    assert "REGION, TICKETS_TOKEN" in html and "env-secret-4b9e1a" not in html
    event = AuditEvent.objects.get(action="mcp.registered")
    assert (event.detail["env_keys"], event.detail["read_only_paths"]) == (
        ["REGION", "TICKETS_TOKEN"],
        ["/usr"],
    )
