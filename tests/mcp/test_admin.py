"""The admin's MCP pages: what a reviewer sees, and approval by another person only."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from skills_app.core.mcp import ToolDefinition
from skills_app.mcp import definitions, servers
from skills_app.models import AuditEvent, McpToolDefinition

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


def test_the_registrant_cannot_approve_and_another_admin_can(
    client, admin_user, second_admin, server
):
    row = McpToolDefinition.objects.get()
    url = reverse("admin:skills_app_mcptooldefinition_changelist")
    action = {"action": "approve", "_selected_action": [row.pk]}
    client.force_login(admin_user)
    page = client.post(url, action, follow=True)
    assert "another person must review its tools" in page.content.decode()
    row.refresh_from_db()
    assert row.status == "pending"
    client.force_login(second_admin)
    page = client.post(url, action, follow=True)
    assert "Approved: get_ticket." in page.content.decode()
    row.refresh_from_db()
    assert (row.status, row.reviewed_by_name) == ("approved", "lee")


def test_changing_who_sees_a_server_is_recorded(client, second_admin, server):
    support = Group.objects.create(name="support")
    client.force_login(second_admin)
    url = reverse("admin:skills_app_mcpserver_change", args=[server.pk])
    inline = client.get(url).context["inline_admin_formsets"][0].formset
    form = {"display_name": "Tickets", "groups": [support.pk], "enabled": "on"}
    form |= {f"{inline.prefix}-{k}": v for k, v in inline.management_form.initial.items()}
    form |= {f"{row.prefix}-id": row.instance.pk for row in inline.forms}
    form |= {f"{row.prefix}-server": server.pk for row in inline.forms}
    assert client.post(url, form).status_code == 302
    server.refresh_from_db()
    assert (list(server.groups.all()), server.everyone) == ([support], False)
    event = AuditEvent.objects.get(action="mcp.changed")
    assert (event.actor_name, event.detail["groups"], event.detail["everyone"]) == (
        "lee",
        ["support"],
        False,
    )
