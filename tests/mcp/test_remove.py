"""Removing a server in the admin (what `mcp remove` does, after a page saying what goes with
it), and a person signing out of an OAuth server: their own grant only."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from skills_app import trail
from skills_app.core.mcp import ToolDefinition
from skills_app.mcp import definitions, oauth_grants, servers
from skills_app.models import AuditEvent, McpOAuthGrant, McpServer, McpToolDefinition

pytestmark = pytest.mark.django_db


@pytest.fixture
def second_admin(django_user_model):
    return django_user_model.objects.create_superuser("lee", password="lee-pass-123")


@pytest.fixture
def wiki(admin_user, alice):
    """An OAuth server with one tool and alice's grant, and one call of hers in the audit."""
    server = servers.register(
        name="wiki",
        kind="http",
        registered_by=admin_user,
        url="https://wiki-mcp.example.com/mcp",
        auth="oauth",
        everyone=True,
    )
    definitions.store_listing(server, [ToolDefinition("search", "Search the wiki.")])
    _grant(alice, server)
    trail.record(
        AuditEvent.MCP_CALLED,
        target="mcp tool wiki/search",
        actor=alice,
        server="wiki",
        tool="search",
        decision="allow",
    )
    return server


def _grant(user, server):
    return McpOAuthGrant.objects.create(
        user=user,
        server=server,
        issuer="https://id.example.com",
        tokens=oauth_grants.seal(""),
        client_info=oauth_grants.seal(""),
    )


def test_an_admin_removes_a_server_after_a_page_saying_what_goes_and_what_stays(second_admin, wiki):
    client = Client(enforce_csrf_checks=True)
    client.force_login(second_admin)
    change = client.get(reverse("admin:skills_app_mcpserver_change", args=[wiki.pk]))
    remove = reverse("admin:skills_app_mcpserver_delete", args=[wiki.pk])
    assert f'href="{remove}"' in change.content.decode()
    page = client.get(remove)
    text = " ".join(page.content.decode().split())
    assert page.status_code == 200
    assert "Its 1 definition (0 of prompts)" in text and "OAuth sign-ins of 1 person" in text
    assert "close when idle" in text
    assert "The audit keeps" in text and "mcp.removed" in text
    # A POST without the page's CSRF token removes nothing.
    assert client.post(remove, {"post": "yes"}).status_code == 403
    assert McpServer.objects.filter(pk=wiki.pk).exists()
    token = page.context["csrf_token"]
    done = client.post(remove, {"post": "yes", "csrfmiddlewaretoken": str(token)}, follow=True)
    assert any(str(m).startswith('Removed "wiki".') for m in done.context["messages"])
    assert not McpServer.objects.filter(name="wiki").exists()
    assert not McpToolDefinition.objects.exists() and not McpOAuthGrant.objects.exists()
    removed = AuditEvent.objects.get(action="mcp.removed")
    assert (removed.actor_name, removed.target) == ("lee", "mcp server wiki")
    assert removed.detail["identity"] == "http:https://wiki-mcp.example.com/mcp"
    assert (removed.detail["definitions"], removed.detail["oauth_grants"]) == (1, 1)
    # The calls made through it stay in the audit, readable as they were.
    called = AuditEvent.objects.get(action="mcp.called")
    assert (called.target, called.actor_name, called.detail["tool"]) == (
        "mcp tool wiki/search",
        "alice",
        "search",
    )


def test_the_command_and_the_admin_remove_alike(admin_user, wiki):
    call_command("mcp", "remove", "wiki", "--as", admin_user.username)
    removed = AuditEvent.objects.get(action="mcp.removed")
    assert (removed.actor_name, removed.detail["definitions"], removed.detail["oauth_grants"]) == (
        "root",
        1,
        1,
    )


def test_staff_without_the_right_to_add_servers_cannot_remove_one(django_user_model, wiki):
    """Seeing and changing a server is not enough: removing it takes the right to add one."""
    clerk = django_user_model.objects.create_user("clerk", password="clerk-pass-123")
    clerk.is_staff = True
    clerk.save()
    clerk.user_permissions.set(
        Permission.objects.filter(
            codename__in=["view_mcpserver", "change_mcpserver", "delete_mcpserver"]
        )
    )
    client = Client()
    client.force_login(clerk)
    remove = reverse("admin:skills_app_mcpserver_delete", args=[wiki.pk])
    assert client.get(remove).status_code == 403
    assert client.post(remove, {"post": "yes"}).status_code == 403
    # Nor through the list's bulk action, which would skip the audit row.
    listing = reverse("admin:skills_app_mcpserver_changelist")
    client.post(
        listing, {"action": "delete_selected", "_selected_action": [wiki.pk], "post": "yes"}
    )
    assert McpServer.objects.filter(pk=wiki.pk).exists()
    assert not AuditEvent.objects.filter(action="mcp.removed").exists()


def test_the_list_offers_no_bulk_delete_even_to_an_admin(second_admin, wiki):
    client = Client()
    client.force_login(second_admin)
    listing = reverse("admin:skills_app_mcpserver_changelist")
    assert "delete_selected" not in client.get(listing).content.decode()
    client.post(
        listing, {"action": "delete_selected", "_selected_action": [wiki.pk], "post": "yes"}
    )
    assert McpServer.objects.filter(pk=wiki.pk).exists()


def test_a_person_signs_out_of_a_server_deleting_their_own_grant(alice, wiki):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    page = client.get(reverse("mcp-oauth-sign-in", args=["wiki"]))
    html = page.content.decode()
    sign_out = reverse("mcp-oauth-sign-out", args=["wiki"])
    assert f'action="{sign_out}"' in html and "Sign out of wiki" in html
    assert client.get(sign_out).status_code == 405
    assert client.post(sign_out).status_code == 403  # no CSRF token
    assert McpOAuthGrant.objects.filter(user=alice).exists()
    token = str(page.context["csrf_token"])
    done = client.post(sign_out, {"csrfmiddlewaretoken": token}, follow=True)
    assert "You are signed out of wiki" in done.content.decode()
    assert not McpOAuthGrant.objects.filter(user=alice).exists()
    event = AuditEvent.objects.get(action="mcp.signed_out")
    assert (event.actor_name, event.target, event.detail["grants"]) == (
        "alice",
        "mcp server wiki",
        1,
    )


def test_signing_out_never_deletes_another_persons_grant(alice, bob, wiki):
    """Bob names alice's grant by its id: only his own grants go, and he holds none."""
    alices = McpOAuthGrant.objects.get(user=alice)
    client = Client()
    client.force_login(bob)
    sign_out = reverse("mcp-oauth-sign-out", args=["wiki"])
    for form in ({"grant": alices.pk}, {"id": alices.pk, "user": alice.pk}):
        client.post(sign_out, form)
        client.post(f"{sign_out}?grant={alices.pk}&user={alice.pk}", form)
    assert McpOAuthGrant.objects.filter(pk=alices.pk).exists()
    # His own sign-out takes his grant and leaves hers.
    _grant(bob, wiki)
    client.post(sign_out)
    assert list(McpOAuthGrant.objects.values_list("user__username", flat=True)) == ["alice"]
