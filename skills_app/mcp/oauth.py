"""Per-person OAuth for MCP servers: the encrypted grant store and the sign-in flow.

A grant (`McpOAuthGrant`) is what one person holds for one server from one issuer: the tokens
and the client registration, each as Fernet ciphertext under a key derived from SECRET_KEY (the
fallback keys still decrypt after a rotation). Nobody else's call ever loads it: a call loads the
grant of its own person (`PersonGrants`).

Signing in spans two requests that any two web processes may serve. The sign-in page (POST,
CSRF-checked) runs the SDK's own flow (`core.mcp.oauth`) up to its authorization URL: discovery,
the issuer checks and the client registration. It then makes this sign-in's own `state` and
PKCE pair (the SDK's public `PKCEParameters`), reads the authorization server's metadata (checked
to name the registration's issuer), keeps all the callback needs in the database, encrypted like
the grants (`McpOAuthPendingSignIn`), and sends the browser to the authorization URL with that
state and challenge. The callback, for the same signed-in person and a `state` their session
started, takes the waiting sign-in (once), checks `iss` (RFC 9207), exchanges the code with the
verifier and the RFC 8707 `resource` through the same address-checking transport, stores the
tokens and lists the tools with them. A waiting sign-in is forgotten after `FLOW_SECONDS`.

Signing out deletes the person's grants here and, when the authorization server's metadata
names a `revocation_endpoint`, asks it to revoke the refresh and the access token (RFC 7009)
first: best effort, within MCP_CONNECT_TIMEOUT, through the same address-checking transport,
the outcome in the sign-out's audit row.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import secrets
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, parse_qsl, quote, urlencode, urlsplit, urlunsplit

import httpx2
from asgiref.sync import sync_to_async
from cryptography.fernet import InvalidToken
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from skills_app import trail
from skills_app.core.mcp.connect import McpConnectError, Place, list_tools, tls_context
from skills_app.core.mcp.oauth import (
    GuardedTransport,
    HeldGrant,
    OAuthSetup,
    PrivateAddressRefused,
    SignInRequired,
    check_public_url,
)
from skills_app.mcp.definitions import store_listing
from skills_app.mcp.servers import spec_for
from skills_app.models import (
    AuditEvent,
    McpOAuthGrant,
    McpOAuthPendingSignIn,
    McpServer,
    sealed,
)

# The SDK's types are imported where a grant is read or a sign-in finishes (see
# `core.mcp.connect`: the SDK is 0.8 s of CPU that every process's start-up would pay).
if TYPE_CHECKING:
    from mcp.shared.auth import OAuthMetadata

logger = logging.getLogger(__name__)

FLOW_SECONDS = 600.0
_SESSION_KEY = "mcp_oauth_states"
# The grants' own key (`models.sealed`): sha256 of "mcp-oauth:" + SECRET_KEY.
OAUTH_PURPOSE = "mcp-oauth"


# --- the encrypted store ----------------------------------------------------------------------


def seal(text: str) -> bytes:
    return sealed.seal(text, OAUTH_PURPOSE)


def unseal(blob: bytes | memoryview) -> str:
    return sealed.unseal(blob, OAUTH_PURPOSE)


def load_grant(user_id: int, server: McpServer) -> HeldGrant | None:
    """The person's latest grant for this server (any issuer: the SDK drops a registration
    that belongs to another issuer than the server names now)."""
    from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

    row = McpOAuthGrant.objects.filter(user_id=user_id, server=server).first()
    if row is None:
        return None
    tokens, client = unseal(row.tokens), unseal(row.client_info)
    return HeldGrant(
        tokens=OAuthToken.model_validate_json(tokens) if tokens else None,
        client_info=OAuthClientInformationFull.model_validate_json(client) if client else None,
    )


def save_grant(user_id: int, server: McpServer, grant: HeldGrant) -> None:
    """Store the grant under its issuer, encrypted."""
    McpOAuthGrant.objects.update_or_create(
        user_id=user_id,
        server=server,
        issuer=grant.issuer,
        defaults={
            "tokens": seal(grant.tokens.model_dump_json() if grant.tokens else ""),
            "client_info": seal(grant.client_info.model_dump_json() if grant.client_info else ""),
        },
    )


def tokens_in(blobs: Iterable[bytes | memoryview]) -> list[str]:
    """The access and refresh tokens sealed in these stored `tokens` values."""
    from mcp.shared.auth import OAuthToken

    found: list[str] = []
    for blob in blobs:
        text = unseal(blob)
        if text:
            tokens = OAuthToken.model_validate_json(text)
            found += [
                tokens.access_token,
                *([tokens.refresh_token] if tokens.refresh_token else []),
            ]
    return found


def reseal_grants() -> tuple[int, int]:
    """Encrypt every stored grant again under the current SECRET_KEY (after a rotation, before
    the fallback keys are dropped): (grants re-encrypted, grants no configured key opens, left
    as they are: they read as not signed in)."""
    keys = sealed.fernet(OAUTH_PURPOSE)
    done = unopened = 0
    for row in McpOAuthGrant.objects.all():
        try:
            tokens, client = (
                keys.rotate(bytes(blob)) if bytes(blob) else b""
                for blob in (row.tokens, row.client_info)
            )
        except InvalidToken:
            unopened += 1
            continue
        McpOAuthGrant.objects.filter(pk=row.pk).update(tokens=tokens, client_info=client)
        done += 1
    return done, unopened


def sign_in_path(server: McpServer) -> str:
    return reverse("mcp-oauth-sign-in", args=[server.name])


def sign_in_link(server: McpServer) -> str:
    return f"{settings.SKILLSCOPE_PUBLIC_URL.rstrip('/')}{sign_in_path(server)}"


@dataclass(frozen=True, slots=True)
class PersonGrants:
    """A call's access to its own person's grant for one server (`core.mcp.tool.GrantStore`)."""

    user_id: int
    server: McpServer
    sign_in_url: str
    allow_private: bool

    async def load(self) -> HeldGrant | None:
        return await sync_to_async(load_grant)(self.user_id, self.server)

    async def save(self, grant: HeldGrant) -> None:
        await sync_to_async(save_grant)(self.user_id, self.server, grant)


def grants_for(user_id: int, server: McpServer) -> PersonGrants:
    return PersonGrants(
        user_id=user_id,
        server=server,
        sign_in_url=sign_in_link(server),
        allow_private=settings.MCP_OAUTH_ALLOW_PRIVATE_ADDRESSES,
    )


# --- the sign-in flow -------------------------------------------------------------------------


class _HandedOver(Exception):
    """Ends the SDK's flow at its authorization URL: the person is sent out by the page, and
    the callback (in whichever process serves it) finishes the sign-in from the database."""


@dataclass(slots=True)
class _Started:
    auth_url: str = ""
    error: str = ""


def _digest(state: str) -> str:
    return hashlib.sha256(state.encode("utf-8")).hexdigest()


def _client(allow_private: bool) -> httpx2.AsyncClient:
    """An HTTP client for the authorization server: every request to a checked address, no
    proxy, no redirect followed (`GuardedTransport`)."""
    timeout = httpx2.Timeout(settings.MCP_CONNECT_TIMEOUT, read=settings.MCP_CALL_TIMEOUT)
    transport = GuardedTransport(allow_private=allow_private, verify=tls_context())
    return httpx2.AsyncClient(transport=transport, timeout=timeout, follow_redirects=False)


async def _discover(server: McpServer, grant: HeldGrant, redirect_uri: str) -> _Started:
    """Run the SDK's flow up to its authorization URL: discovery, the issuer checks and (when
    the person holds none for this issuer) the client registration, into `grant`."""
    allow_private = settings.MCP_OAUTH_ALLOW_PRIVATE_ADDRESSES
    started = _Started()

    async def send_out(url: str) -> None:
        check_public_url(url, allow_private=allow_private)
        started.auth_url = url
        raise _HandedOver

    setup = OAuthSetup(grant=grant, redirect_uri=redirect_uri, allow_private=allow_private)
    setup = replace(setup, redirect=send_out)
    spec = spec_for(server)
    spec = replace(spec, oauth=setup, call_timeout=spec.connect_timeout)
    try:
        with tempfile.TemporaryDirectory() as folder:
            place = Place(root=Path(folder), skills_dir=Path(folder))
            await list_tools(spec, place)
    except McpConnectError as exc:
        if not started.auth_url:
            started.error = str(exc)
    except Exception as exc:  # the SDK's own checks (issuer, registration) end up here
        if not started.auth_url:
            started.error = f"{type(exc).__name__}: {exc}"
    if not started.auth_url and not started.error:
        started.error = "The server did not ask for a sign-in."
    return started


async def _issuer_metadata(issuer: str, server_url: str, allow_private: bool) -> OAuthMetadata:
    """The authorization server's metadata (RFC 8414), checked to name `issuer`."""
    from mcp.client.auth import OAuthFlowError
    from mcp.client.auth.utils import (
        build_oauth_authorization_server_metadata_discovery_urls,
        create_oauth_metadata_request,
        handle_auth_metadata_response,
        issuers_match,
    )

    async with _client(allow_private) as client:
        for url in build_oauth_authorization_server_metadata_discovery_urls(issuer, server_url):
            ok, metadata = await handle_auth_metadata_response(
                await client.send(create_oauth_metadata_request(url))
            )
            if not ok:
                break
            if metadata is not None:
                if not issuers_match(str(metadata.issuer), issuer):
                    raise OAuthFlowError(f"The metadata names {metadata.issuer}, not {issuer}.")
                return metadata
    raise OAuthFlowError(f"The authorization server {issuer} publishes no metadata.")


async def _start(server: McpServer, uid: int, redirect_uri: str) -> tuple[str, str]:
    """Discover, register, and keep what the callback needs in the database: (the URL to send
    the person to, "") or ("", what went wrong). The state and the PKCE pair are this sign-in's
    own, made here, so the verifier is known to the callback."""
    from mcp.client.auth import PKCEParameters

    held = await sync_to_async(load_grant)(uid, server)
    # A fresh sign-in: the registration is kept, the old tokens are not.
    grant = HeldGrant(client_info=held.client_info if held else None)
    started = await _discover(server, grant, redirect_uri)
    if started.error:
        return "", started.error
    if grant.client_info is None:
        return "", "The server's authorization server registered no client."
    allow_private = settings.MCP_OAUTH_ALLOW_PRIVATE_ADDRESSES
    try:
        metadata = await _issuer_metadata(grant.issuer, server.url, allow_private)
    except Exception as exc:  # the SDK's checks, an unreachable or refused address
        return "", f"{type(exc).__name__}: {exc}"
    parts = urlsplit(started.auth_url)
    params = dict(parse_qsl(parts.query, keep_blank_values=True))
    pkce = PKCEParameters.generate()
    state = secrets.token_urlsafe(32)
    params |= {"state": state, "code_challenge": pkce.code_challenge}
    params["code_challenge_method"] = "S256"
    pending = {
        "verifier": pkce.code_verifier,
        "redirect_uri": redirect_uri,
        "resource": params.get("resource"),
        "scope": params.get("scope"),
        "client_info": grant.client_info.model_dump_json(),
        "metadata": metadata.model_dump_json(),
    }
    await sync_to_async(_keep_pending)(uid, server, state, pending)
    return urlunsplit(parts._replace(query=urlencode(params))), ""


def _keep_pending(uid: int, server: McpServer, state: str, pending: dict[str, Any]) -> None:
    """Store a started sign-in (encrypted), replacing the person's earlier one to this server
    and forgetting every one older than FLOW_SECONDS."""
    with transaction.atomic():
        too_old = timezone.now() - timedelta(seconds=FLOW_SECONDS)
        McpOAuthPendingSignIn.objects.filter(created_at__lt=too_old).delete()
        McpOAuthPendingSignIn.objects.filter(user_id=uid, server=server).delete()
        McpOAuthPendingSignIn.objects.create(
            user_id=uid,
            server=server,
            state_digest=_digest(state),
            sealed=seal(json.dumps(pending)),
        )


def _take_pending(uid: int, state: str) -> tuple[McpServer, dict[str, Any]] | None:
    """The person's waiting sign-in with this state, removed (a code is exchanged once), or
    None: not theirs, expired, or taken already."""
    fresh = timezone.now() - timedelta(seconds=FLOW_SECONDS)
    row = (
        McpOAuthPendingSignIn.objects.select_related("server")
        .filter(state_digest=_digest(state), user_id=uid, created_at__gte=fresh)
        .first()
    )
    if row is None:
        return None
    deleted, _ = McpOAuthPendingSignIn.objects.filter(pk=row.pk).delete()
    if not deleted:
        return None  # another request took it meanwhile
    try:
        return row.server, json.loads(unseal(row.sealed))
    except (InvalidToken, ValueError):
        return None


async def _exchange(
    server: McpServer, pending: dict[str, Any], code: str, iss: str | None
) -> HeldGrant:
    """The token request for the code (PKCE verifier, RFC 8707 resource), after the RFC 9207
    `iss` check; the grant it gives. Raises the SDK's OAuthFlowError or OAuthTokenError."""
    from mcp.client.auth import OAuthTokenError
    from mcp.client.auth.oauth2 import OAuthContext
    from mcp.client.auth.utils import (
        handle_token_response_scopes,
        validate_authorization_response_iss,
    )
    from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthMetadata

    metadata = OAuthMetadata.model_validate_json(pending["metadata"])
    validate_authorization_response_iss(iss, metadata)
    client_info = OAuthClientInformationFull.model_validate_json(pending["client_info"])
    grant = HeldGrant(client_info=client_info)
    data = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": pending["redirect_uri"],
        "client_id": client_info.client_id,
        "code_verifier": pending["verifier"],
    }
    if pending.get("resource"):
        data["resource"] = pending["resource"]
    context = OAuthContext(
        server_url=server.url,
        client_metadata=OAuthClientMetadata.model_validate(
            client_info.model_dump(include=set(OAuthClientMetadata.model_fields))
        ),
        storage=grant,
        redirect_handler=None,
        callback_handler=None,
        client_info=client_info,
    )
    data, headers = context.prepare_token_auth(
        data, {"Content-Type": "application/x-www-form-urlencoded"}
    )
    async with _client(settings.MCP_OAUTH_ALLOW_PRIVATE_ADDRESSES) as client:
        response = await client.post(str(metadata.token_endpoint), data=data, headers=headers)
        if response.status_code not in (200, 201):
            raise OAuthTokenError(f"The token request was refused ({response.status_code}).")
        tokens = await handle_token_response_scopes(response)
    if tokens.scope is None:
        tokens.scope = pending.get("scope")
    grant.tokens = tokens
    return grant


async def _listed_with(server: McpServer, grant: HeldGrant, redirect_uri: str) -> None:
    """List the tools with the new token and store them: new or changed ones wait for review."""
    allow_private = settings.MCP_OAUTH_ALLOW_PRIVATE_ADDRESSES
    setup = OAuthSetup(grant=grant, redirect_uri=redirect_uri, allow_private=allow_private)
    try:
        with tempfile.TemporaryDirectory() as folder:
            place = Place(root=Path(folder), skills_dir=Path(folder))
            listed = await list_tools(replace(spec_for(server), oauth=setup), place)
    except (McpConnectError, SignInRequired) as exc:
        logger.warning("Listing the tools of %s after a sign-in failed: %s", server.name, exc)
        return
    await sync_to_async(store_listing)(server, listed)


def _uid(user: Any) -> int:
    pk = user.pk
    assert isinstance(pk, int)  # login_required
    return pk


def _server_for(user: Any, name: str) -> McpServer:
    server = get_object_or_404(McpServer, name=name, auth="oauth", enabled=True)
    if not server.everyone and not server.groups.filter(pk__in=user.groups.all()).exists():
        raise PermissionError
    return server


def _page(request: HttpRequest, context: dict[str, object], status: int = 200) -> HttpResponse:
    return render(request, "skills_app/mcp/oauth_sign_in.html", context, status=status)


# The two views are async: each waits on the authorization server (the POST for discovery and
# registration, the callback for the token exchange and the listing). Under ASGI, Django runs
# every synchronous view of a process on one thread, so a synchronous wait here would pause
# every other page of the process until the server answered.


@login_required
@require_http_methods(["GET", "POST"])
async def sign_in(request: HttpRequest, name: str) -> HttpResponse:
    """The page naming the server, and (POST) starting the person's sign-in to it."""
    user = await request.auser()
    uid = _uid(user)
    try:
        server = await sync_to_async(_server_for)(user, name)
    except PermissionError:
        return HttpResponse("This server is not offered to you.", status=403)
    context: dict[str, object] = {"server": server, "signed_in": False, "problem": ""}
    if request.method == "GET":
        context["signed_in"] = await McpOAuthGrant.objects.filter(
            user_id=uid, server=server
        ).aexists()
        return await sync_to_async(_page)(request, context)
    try:
        await sync_to_async(check_public_url, thread_sensitive=False)(
            server.url, allow_private=settings.MCP_OAUTH_ALLOW_PRIVATE_ADDRESSES
        )
    except PrivateAddressRefused as exc:
        context["problem"] = str(exc)
        return await sync_to_async(_page)(request, context, 400)
    # The public URL, not the request's host: the registration keeps this one address.
    redirect_uri = f"{settings.SKILLSCOPE_PUBLIC_URL.rstrip('/')}{reverse('mcp-oauth-callback')}"
    auth_url, problem = await _start(server, uid, redirect_uri)
    if problem:
        context["problem"] = problem
        return await sync_to_async(_page)(request, context, 502)
    state = parse_qs(urlsplit(auth_url).query)["state"][0]
    states = await request.session.aget(_SESSION_KEY, [])
    await request.session.aset(_SESSION_KEY, [*states[-4:], state])
    return redirect(auth_url)


@login_required
@require_http_methods(["POST"])
async def sign_out(request: HttpRequest, name: str) -> HttpResponse:
    """Delete the signed-in person's own grants for this server (never anyone else's: the
    request names no grant) and their waiting sign-ins, recorded in the audit."""
    user = await request.auser()
    server = await McpServer.objects.filter(name=name, auth="oauth").afirst()
    if server is None:
        raise Http404("No OAuth MCP server of that name.")
    held = await sync_to_async(load_grant)(_uid(user), server)
    revoked = await _revoke(server, held) if held is not None else ""
    grants = await sync_to_async(_forget_grants)(user, server, revoked)
    context: dict[str, object] = {
        "server": server,
        "signed_in": False,
        "signed_out": True,
        "had_grant": bool(grants),
        "problem": "",
    }
    return await sync_to_async(_page)(request, context)


async def _revoke(server: McpServer, grant: HeldGrant) -> str:
    """Ask the grant's authorization server to revoke its tokens (RFC 7009), refresh token
    first (revoking it may end the access token too); what happened, in words for the audit."""
    tokens, client = grant.tokens, grant.client_info
    if tokens is None or client is None or not grant.issuer or not client.client_id:
        return "no tokens to revoke"
    allow_private = settings.MCP_OAUTH_ALLOW_PRIVATE_ADDRESSES
    done: list[str] = []
    try:
        async with asyncio.timeout(settings.MCP_CONNECT_TIMEOUT):
            metadata = await _issuer_metadata(grant.issuer, server.url, allow_private)
            if metadata.revocation_endpoint is None:
                return "not revoked: the authorization server offers no revocation endpoint"
            endpoint = str(metadata.revocation_endpoint)
            async with _client(allow_private) as http:
                for hint, token in (
                    ("refresh_token", tokens.refresh_token),
                    ("access_token", tokens.access_token),
                ):
                    if not token:
                        continue
                    form = {"token": token, "token_type_hint": hint, "client_id": client.client_id}
                    headers: dict[str, str] = {}
                    if client.client_secret:
                        # The client authenticates as at the token endpoint (RFC 7009 2.1).
                        if client.token_endpoint_auth_method == "client_secret_basic":
                            pair = f"{quote(client.client_id, safe='')}:"
                            pair += quote(client.client_secret, safe="")
                            basic = base64.b64encode(pair.encode()).decode()
                            headers["Authorization"] = f"Basic {basic}"
                        else:
                            form["client_secret"] = client.client_secret
                    answer = await http.post(endpoint, data=form, headers=headers)
                    if answer.status_code != 200:
                        raise OSError(
                            f"the {hint} got HTTP {answer.status_code}: {answer.text[:300]}"
                        )
                    done.append(hint)
    except Exception as exc:  # best effort: the grant is forgotten here whatever happens
        logger.warning("Revoking the tokens of %s at its issuer failed: %s", server.name, exc)
        kept = f" ({' and '.join(done)} revoked)" if done else ""
        return f"revocation failed: {type(exc).__name__}: {exc}{kept}"
    return f"revoked the {' and '.join(done)}" if done else "no tokens to revoke"


def _forget_grants(user: Any, server: McpServer, revoked: str = "") -> int:
    with transaction.atomic():
        deleted, _ = McpOAuthGrant.objects.filter(user_id=_uid(user), server=server).delete()
        McpOAuthPendingSignIn.objects.filter(user_id=_uid(user), server=server).delete()
        trail.record(
            AuditEvent.MCP_SIGNED_OUT,
            target=f"mcp server {server.name}",
            actor=user,
            server=server.name,
            grants=deleted,
            revocation=revoked,
        )
    return deleted


@login_required
@require_http_methods(["GET"])
async def callback(request: HttpRequest) -> HttpResponse:
    """Where the authorization server sends the person back: only to a sign-in they started
    (in any web process: it waits in the database), whose code it exchanges itself."""
    from mcp.client.auth import OAuthFlowError, OAuthTokenError

    user = await request.auser()
    uid = _uid(user)
    state = request.GET.get("state", "")
    mine = await request.session.aget(_SESSION_KEY, [])
    taken = await sync_to_async(_take_pending)(uid, state) if state in mine else None
    if taken is None:
        return HttpResponseBadRequest("This sign-in was not started by you, or it expired.")
    server, pending = taken
    await request.session.aset(_SESSION_KEY, [s for s in mine if s != state])
    context: dict[str, object] = {"server": server, "signed_in": False, "problem": ""}
    if request.GET.get("error"):
        context["problem"] = f"The server refused: {request.GET['error']}."
        return await sync_to_async(_page)(request, context, 400)
    try:
        grant = await _exchange(
            server, pending, request.GET.get("code", ""), request.GET.get("iss")
        )
    except (OAuthFlowError, OAuthTokenError, httpx2.HTTPError, PrivateAddressRefused) as exc:
        context["problem"] = f"The sign-in could not be finished: {exc}"
        return await sync_to_async(_page)(request, context, 502)
    await sync_to_async(save_grant)(uid, server, grant)
    await _listed_with(server, grant, pending["redirect_uri"])
    context["signed_in"] = True
    return await sync_to_async(_page)(request, context)
