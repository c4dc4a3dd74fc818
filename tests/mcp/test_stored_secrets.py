"""A registered server's env and header values are encrypted at rest, as OAuth tokens are: the
database holds Fernet ciphertext, while the server's process, the outbound filter and the
admin's key lists see what they saw before. Rows stored before the change are encrypted by the
data migration."""

from __future__ import annotations

import importlib

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from django.urls import reverse

from skills_app.core.permissions import ToolCall
from skills_app.mcp import oauth_grants, servers
from skills_app.mcp.filter import CARRIES_SECRET, refusal
from skills_app.models import McpOAuthGrant, McpServer

pytestmark = pytest.mark.django_db

ENV_VALUE = "env-value-7d1c90be44"
HEADER_VALUE = "hdr-token-52aa06e1f3"


def raw_columns(name: str) -> str:
    """The server's env and headers exactly as the database holds them."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT env, headers FROM skills_app_mcpserver WHERE name = %s", [name])
        env, headers = cursor.fetchone()
    return f"{env} {headers}"


def test_env_and_header_values_are_stored_encrypted_and_read_back_plain(alice, admin_user, client):
    local = servers.register(
        name="local",
        kind="stdio",
        registered_by=alice,
        argv=["/opt/local-mcp/server"],
        env={"LOCAL_TOKEN": ENV_VALUE},
        everyone=True,
    )
    remote = servers.register(
        name="remote",
        kind="http",
        registered_by=alice,
        url="https://remote.example/mcp",
        headers={"Authorization": f"Bearer {HEADER_VALUE}"},
        everyone=True,
    )
    stored = raw_columns("local") + raw_columns("remote")
    assert ENV_VALUE not in stored and HEADER_VALUE not in stored
    assert "LOCAL_TOKEN" in stored and "Authorization" in stored  # the names are no secret
    # What runs gets the plain values.
    assert servers.spec_for(McpServer.objects.get(pk=local.pk)).env == {"LOCAL_TOKEN": ENV_VALUE}
    assert servers.spec_for(McpServer.objects.get(pk=remote.pk)).headers == {
        "Authorization": f"Bearer {HEADER_VALUE}"
    }
    # The outbound filter still knows them, and the admin's list shows the names only.
    for value in (ENV_VALUE, HEADER_VALUE):
        refused = refusal(
            ToolCall("mcp__local__echo", {"text": value}), user_id=alice.pk, quotes_hidden=bool
        )
        assert refused is not None and refused[0] == CARRIES_SECRET
    client.force_login(admin_user)
    page = client.get(reverse("admin:skills_app_mcpserver_changelist")).content.decode()
    assert "LOCAL_TOKEN" in page and ENV_VALUE not in page and HEADER_VALUE not in page


def test_the_migration_encrypts_the_values_of_servers_stored_before_it(alice):
    migration = importlib.import_module("skills_app.migrations.0043_mcp_sealed_server_secrets")
    before = MigrationLoader(connection).project_state(("skills_app", "0042_mcp_oauth")).apps
    Old = before.get_model("skills_app", "McpServer")
    Old.objects.create(
        name="old",
        kind="stdio",
        identity='stdio:["/opt/old/server"]',
        argv=["/opt/old/server"],
        env={"OLD_TOKEN": ENV_VALUE},
        registered_by_name="alice",
    )
    assert ENV_VALUE in raw_columns("old")  # as a row stored before the change
    migration.seal_existing(before, None)
    assert ENV_VALUE not in raw_columns("old")
    assert McpServer.objects.get(name="old").env == {"OLD_TOKEN": ENV_VALUE}
    migration.open_existing(before, None)  # and back, for a migration backwards
    assert ENV_VALUE in raw_columns("old")


def test_after_a_key_rotation_reseal_keeps_the_values_readable_once_the_old_key_is_gone(
    alice, settings
):
    old, new = "old-secret-key-" + "o" * 40, "new-secret-key-" + "n" * 40
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = old, []
    server = servers.register(
        name="local",
        kind="stdio",
        registered_by=alice,
        argv=["/opt/local-mcp/server"],
        env={"LOCAL_TOKEN": ENV_VALUE},
    )
    grant = McpOAuthGrant.objects.create(
        user=alice,
        server=server,
        issuer="https://as.example",
        tokens=oauth_grants.seal(HEADER_VALUE),
    )
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = new, [old]  # the rotation
    call_command("mcp", "reseal")
    settings.SECRET_KEY_FALLBACKS = []  # two weeks later: the old key is dropped
    assert McpServer.objects.get(pk=server.pk).env == {"LOCAL_TOKEN": ENV_VALUE}
    grant.refresh_from_db()
    assert oauth_grants.unseal(grant.tokens) == HEADER_VALUE
    # A value under a key that is gone is named, and nothing is changed.
    settings.SECRET_KEY = "third-secret-key-" + "t" * 40
    with pytest.raises(CommandError, match='A stored value of "local" opens under none'):
        call_command("mcp", "reseal")
    settings.SECRET_KEY = new
    assert McpServer.objects.get(pk=server.pk).env == {"LOCAL_TOKEN": ENV_VALUE}
