"""OAuth MCP servers: a real sign-in against the toy server acting as its own authorization
server on loopback (the SDK's provider routes), the encrypted store, and the refusals."""

from __future__ import annotations

import importlib
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from asgiref.sync import async_to_sync, iscoroutinefunction
from django.core.management import CommandError, call_command
from django.urls import reverse

from skills_app.core.mcp import McpTool, ToolDefinition
from skills_app.core.mcp.oauth import HeldGrant
from skills_app.core.permissions import ToolCall
from skills_app.core.tools import ToolContext, Workspace
from skills_app.mcp import oauth_grants, oauth_sign_in, servers
from skills_app.mcp.filter import CARRIES_SECRET, refusal
from skills_app.mcp.transport import PrivateAddressRefused, check_public_url
from skills_app.models import (
    AuditEvent,
    McpOAuthGrant,
    McpOAuthPendingSignIn,
    McpServer,
    McpToolDefinition,
)
from tests.support.mcp_toy import toy_http_server

# One worker runs them all under pytest-xdist, so the OAuth toy server starts once in a run.
pytestmark = [pytest.mark.django_db, pytest.mark.xdist_group("mcp-oauth")]

WHOAMI = ToolDefinition(name="whoami", description="Name the client and resource of the token.")


@pytest.fixture(scope="module")
def oauth_url(tmp_path_factory):
    """The toy server with `--oauth`: MCP at /mcp, its authorization server at the root."""
    with toy_http_server(tmp_path_factory.mktemp("toy-oauth"), 20.0, "--oauth") as url:
        yield url


@pytest.fixture
def secure(alice, oauth_url, settings):
    settings.MCP_OAUTH_ALLOW_PRIVATE_ADDRESSES = True  # the toy server is on loopback
    return servers.register(
        name="secure", kind="http", registered_by=alice, url=oauth_url, auth="oauth", everyone=True
    )


def whoami(server, user, tmp_path) -> tuple[str, bool]:
    tool = McpTool(
        servers.spec_for(server),
        WHOAMI,
        result_limit=10_000,
        grants=oauth_grants.grants_for(user.pk, server),
    )
    result = async_to_sync(tool.run)({}, ToolContext(workspace=Workspace(tmp_path / "ws")))
    return result.content, result.is_error


def sign_in(client, server) -> None:
    """The whole sign-in: Skillscope's pages through the test client, the authorization
    server's redirect through httpx2 (the SDK's HTTP client)."""
    page = reverse("mcp-oauth-sign-in", args=[server.name])
    assert "Sign in to secure" in client.get(page).content.decode()
    started = client.post(page)
    assert started.status_code == 302, started.content.decode()
    authorize = started["Location"]
    query = parse_qs(urlsplit(authorize).query)
    assert query["code_challenge_method"] == ["S256"] and query["code_challenge"][0]
    assert query["resource"] == [server.url]  # RFC 8707
    back = httpx2.get(authorize, follow_redirects=False)
    assert back.status_code == 302
    answer = urlsplit(back.headers["location"])
    assert answer.path == reverse("mcp-oauth-callback")
    assert "iss" in parse_qs(answer.query)  # RFC 9207: the SDK checks it against the metadata
    done = client.get(f"{answer.path}?{answer.query}")
    assert done.status_code == 200, done.content.decode()
    assert "You are signed in to secure" in done.content.decode()


def test_a_person_signs_in_and_calls_the_server_with_their_own_encrypted_token(
    alice, bob, secure, client, tmp_path
):
    text, is_error = whoami(secure, alice, tmp_path)
    assert is_error and reverse("mcp-oauth-sign-in", args=["secure"]) in text
    assert "needs the user to sign in" in text

    client.force_login(alice)
    sign_in(client, secure)

    row = McpOAuthGrant.objects.get(user=alice, server=secure)
    assert row.issuer == secure.url.removesuffix("/mcp")
    grant = oauth_grants.load_grant(alice.pk, secure)
    assert grant is not None and grant.tokens is not None
    token = grant.tokens.access_token
    assert token.startswith("toy-at-")
    for column in (row.tokens, row.client_info):
        assert token.encode() not in bytes(column) and b"toy-" not in bytes(column)
    # The sign-in listed the tools with the token: they wait for review like any others.
    assert McpToolDefinition.objects.filter(server=secure, tool="whoami", status="pending")

    text, is_error = whoami(secure, alice, tmp_path)
    assert not is_error, text
    assert f"resource={secure.url}" in text  # the token names this server only
    # A stored token is a secret: a call that carries one never leaves.
    call = ToolCall("mcp__secure__echo", {"text": f"here: {token}"})
    refused = refusal(call, user_id=alice.pk, quotes_hidden=lambda arguments: False)
    assert refused is not None and refused[0] == CARRIES_SECRET
    assert token not in str(refused[1].input)

    # Bob has no token of his own and never gets Alice's.
    text, is_error = whoami(secure, bob, tmp_path)
    assert is_error and "needs the user to sign in" in text and token not in text
    client.force_login(bob)
    stolen = client.get(f"{reverse('mcp-oauth-callback')}?code=x&state=guessed")
    assert stolen.status_code == 400


def _status_with(url: str, token: str) -> int:
    """The MCP endpoint's answer to an initialize request carrying this bearer token."""
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    return httpx2.post(url, json=hello, headers=headers).status_code


def test_signing_out_revokes_the_tokens_at_the_authorization_server(alice, secure, client):
    client.force_login(alice)
    sign_in(client, secure)
    grant = oauth_grants.load_grant(alice.pk, secure)
    assert grant is not None and grant.tokens is not None and grant.client_info is not None
    access, refresh = grant.tokens.access_token, grant.tokens.refresh_token
    assert refresh and _status_with(secure.url, access) == 200  # the token works until then
    page = client.post(reverse("mcp-oauth-sign-out", args=["secure"]))
    assert page.status_code == 200 and "signed out" in page.content.decode().lower()
    assert not McpOAuthGrant.objects.filter(user=alice, server=secure).exists()
    # Checked at the authorization server: neither token works any more.
    assert _status_with(secure.url, access) == 401
    info = grant.client_info
    form = {"grant_type": "refresh_token", "refresh_token": refresh, "client_id": info.client_id}
    auth = None
    if info.token_endpoint_auth_method == "client_secret_basic":
        auth = (info.client_id, info.client_secret)
    elif info.client_secret:
        form["client_secret"] = info.client_secret
    refreshed = httpx2.post(f"{grant.issuer.rstrip('/')}/token", data=form, auth=auth)
    assert refreshed.status_code == 400 and "invalid_grant" in refreshed.text
    event = AuditEvent.objects.get(action=AuditEvent.MCP_SIGNED_OUT)
    assert (event.detail["grants"], event.detail["revocation"]) == (
        1,
        "revoked the refresh_token and access_token",
    )


def test_a_rejected_token_asks_the_person_to_sign_in_again(alice, secure, client, tmp_path):
    client.force_login(alice)
    sign_in(client, secure)
    grant = oauth_grants.load_grant(alice.pk, secure)
    assert grant is not None and grant.tokens is not None
    grant.tokens.access_token = "toy-at-revoked-long-ago"
    grant.tokens.refresh_token = None
    oauth_grants.save_grant(alice.pk, secure, HeldGrant(grant.tokens, grant.client_info))
    text, is_error = whoami(secure, alice, tmp_path)
    assert is_error and "needs the user to sign in" in text
    assert reverse("mcp-oauth-sign-in", args=["secure"]) in text


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1/x", "http://10.1.2.3/", "http://169.254.169.254/latest", "http://[::1]/"],
)
def test_discovery_and_redirects_to_private_addresses_are_refused(url):
    with pytest.raises(PrivateAddressRefused):
        check_public_url(url, allow_private=False)
    check_public_url(url, allow_private=True)


def test_an_oauth_server_on_a_private_address_is_refused_without_the_setting(
    secure, client, alice, settings, tmp_path
):
    client.force_login(alice)
    sign_in(client, secure)  # allowed while the setting is on
    settings.MCP_OAUTH_ALLOW_PRIVATE_ADDRESSES = False
    refused = client.post(reverse("mcp-oauth-sign-in", args=["secure"]))
    assert refused.status_code == 400
    assert "private, loopback or link-local" in refused.content.decode()
    # A call with the stored token does not go out either (every request of the OAuth client).
    text, is_error = whoami(secure, alice, tmp_path)
    assert is_error and "private, loopback or link-local" in text and "client=" not in text


def test_an_oauth_server_is_added_in_the_admin_or_with_the_command(client, admin_user, alice):
    client.force_login(admin_user)
    form = {"name": "wiki", "display_name": "", "kind": "http", "url": "https://wiki.example/mcp"}
    form |= {"headers": "", "argv": "", "env": "", "read_only_paths": "", "oauth": "on"}
    html = client.post(reverse("admin:skills_app_mcpserver_add"), form, follow=True)
    assert McpServer.objects.get(name="wiki").auth == "oauth"
    assert "/mcp/wiki/sign-in/" in html.content.decode()  # where the admin signs in to list
    call_command(
        "mcp", "add", "tickets", "--as", "alice", "--url", "https://t.example/mcp", "--oauth"
    )
    assert McpServer.objects.get(name="tickets").auth == "oauth"
    with pytest.raises(CommandError, match="OAuth is for Streamable HTTP servers"):
        call_command("mcp", "add", "local", "--as", "alice", "--oauth", "--argv", "/bin/true")
    with pytest.raises(CommandError, match="say whose sign-in to use"):
        call_command("mcp", "test", "tickets")


def test_a_new_sign_in_replaces_the_persons_waiting_one(alice, secure, client):
    """One waiting sign-in per person and server: a second one cancels the first."""
    page = reverse("mcp-oauth-sign-in", args=[secure.name])
    client.force_login(alice)
    first = client.post(page)
    second = client.post(page)
    assert first.status_code == second.status_code == 302
    states = [parse_qs(urlsplit(r["Location"]).query)["state"][0] for r in (first, second)]
    assert states[0] != states[1]
    # The first one's redirect back is refused: it was cancelled by the second.
    back = httpx2.get(first["Location"], follow_redirects=False)
    answer = urlsplit(back.headers["location"])
    assert client.get(f"{answer.path}?{answer.query}").status_code == 400


def test_the_callback_finishes_a_sign_in_started_by_another_web_process(alice, secure, client):
    """The sign-in page and the callback may be served by two processes: what the callback
    needs (state, PKCE verifier, registration, where to exchange the code) waits in the
    database, encrypted, and the callback exchanges the code itself."""
    client.force_login(alice)
    started = client.post(reverse("mcp-oauth-sign-in", args=[secure.name]))
    assert started.status_code == 302, started.content.decode()
    state = parse_qs(urlsplit(started["Location"]).query)["state"][0]
    pending = McpOAuthPendingSignIn.objects.get(user=alice, server=secure)
    assert state.encode() not in bytes(pending.sealed) and b"verifier" not in bytes(pending.sealed)
    # As a fresh process would have it: nothing of the sign-in held in this module's memory.
    importlib.reload(oauth_sign_in)
    back = httpx2.get(started["Location"], follow_redirects=False)
    answer = urlsplit(back.headers["location"])
    done = client.get(f"{answer.path}?{answer.query}")
    assert done.status_code == 200, done.content.decode()
    assert "You are signed in to secure" in done.content.decode()
    grant = oauth_grants.load_grant(alice.pk, secure)
    assert grant is not None and grant.tokens is not None
    assert grant.tokens.access_token.startswith("toy-at-")
    assert not McpOAuthPendingSignIn.objects.exists()
    # The sign-in listed the tools with the new token, and a code is used once.
    assert McpToolDefinition.objects.filter(server=secure, tool="whoami").exists()
    assert client.get(f"{answer.path}?{answer.query}").status_code == 400


def test_the_sign_in_views_wait_without_holding_the_shared_thread():
    """Django runs every synchronous view of an ASGI process on one thread: a view that waits
    on an authorization server must be async, or every other page of the process waits too."""
    assert iscoroutinefunction(oauth_sign_in.sign_in)
    assert iscoroutinefunction(oauth_sign_in.callback)


def test_a_kept_session_with_one_persons_token_never_carries_anothers_call(
    alice, bob, secure, client, tmp_path
):
    for person in (alice, bob):
        client.force_login(person)
        sign_in(client, secure)
    clients = {p: oauth_grants.load_grant(p.pk, secure).client_info.client_id for p in (alice, bob)}
    assert clients[alice] != clients[bob]
    ctx = ToolContext(workspace=Workspace(tmp_path / "ws"))

    async def both() -> list[str]:
        # One event loop, so Alice's session is still open when Bob calls.
        answers = []
        for person in (alice, bob, alice):
            grants = oauth_grants.grants_for(person.pk, secure)
            tool = McpTool(servers.spec_for(secure), WHOAMI, result_limit=10_000, grants=grants)
            answers.append((await tool.run({}, ctx)).content)
        return answers

    first, second, third = async_to_sync(both)()
    assert f"client={clients[alice]} " in first and f"client={clients[alice]} " in third
    assert f"client={clients[bob]} " in second
