"""Per-person OAuth for MCP servers: the encrypted grant store and the sign-in flow.

A grant (`McpOAuthGrant`) is what one person holds for one server from one issuer: the tokens
and the client registration, each as Fernet ciphertext under a key derived from SECRET_KEY (the
fallback keys still decrypt after a rotation). Nobody else's call ever loads it: a call loads the
grant of its own person (`PersonGrants`).

Signing in runs the SDK's own authorization-code flow (`core.mcp.oauth`). The flow is one
coroutine that waits for the person between the authorization URL and the redirect back, so it
runs on a thread of this process: the sign-in page (POST, CSRF-checked) starts it and sends the
browser to the authorization URL; the callback, for the same signed-in person and a `state` this
person's session started, hands it the code and waits for the tokens. The SDK checks the
`state`, the `iss` and PKCE; the tokens are then stored. The two requests must reach the same
process (one ASGI process does); a flow is forgotten after `FLOW_SECONDS`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from asgiref.sync import sync_to_async
from cryptography.fernet import InvalidToken
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from skills_app.core.mcp.connect import McpConnectError, Place, list_tools
from skills_app.core.mcp.definitions import ToolDefinition
from skills_app.core.mcp.oauth import (
    HeldGrant,
    OAuthSetup,
    PrivateAddressRefused,
    check_public_url,
)
from skills_app.mcp.definitions import store_listing
from skills_app.mcp.servers import spec_for
from skills_app.models import McpOAuthGrant, McpServer, sealed

# The SDK's types are imported where a grant is read or a sign-in finishes (see
# `core.mcp.connect`: the SDK is 0.8 s of CPU that every process's start-up would pay).
if TYPE_CHECKING:
    from mcp.client.auth import AuthorizationCodeResult

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


def token_values() -> list[str]:
    """Every stored OAuth token (access and refresh, of every person): secrets that no call may
    carry out and no result may show (`filter.stored_secrets`)."""
    from mcp.shared.auth import OAuthToken

    found: list[str] = []
    for blob in McpOAuthGrant.objects.values_list("tokens", flat=True):
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


@dataclass(eq=False)
class _Flow:
    user_id: int
    server_pk: int
    grant: HeldGrant
    started: float = field(default_factory=time.monotonic)
    url_ready: threading.Event = field(default_factory=threading.Event)
    finished: threading.Event = field(default_factory=threading.Event)
    code: concurrent.futures.Future[AuthorizationCodeResult] = field(
        default_factory=concurrent.futures.Future
    )
    auth_url: str = ""
    error: str = ""
    listed: list[ToolDefinition] = field(default_factory=list)


# state -> the flow waiting for the redirect with that state
_flows: dict[str, _Flow] = {}
_flows_lock = threading.Lock()


def _forget_old() -> None:
    now = time.monotonic()
    with _flows_lock:
        for state, flow in list(_flows.items()):
            if now - flow.started > FLOW_SECONDS:
                flow.code.cancel()
                del _flows[state]


def _state_of(url: str) -> str:
    return parse_qs(urlsplit(url).query).get("state", [""])[0]


def _run_flow(flow: _Flow, server: McpServer, redirect_uri: str) -> None:
    """The SDK's flow, on this thread's own event loop: greet the server (its 401 starts the
    flow), send the authorization URL out, wait for the code, exchange it, list the tools."""
    allow_private = settings.MCP_OAUTH_ALLOW_PRIVATE_ADDRESSES

    async def send_out(url: str) -> None:
        check_public_url(url, allow_private=allow_private)
        flow.auth_url = url
        flow.url_ready.set()

    async def wait_for_code() -> AuthorizationCodeResult:
        return await asyncio.wrap_future(flow.code)

    setup = OAuthSetup(
        grant=flow.grant,
        redirect_uri=redirect_uri,
        allow_private=allow_private,
        redirect=send_out,
        callback=wait_for_code,
    )
    spec = replace(spec_for(server), oauth=setup, call_timeout=FLOW_SECONDS)
    try:
        with tempfile.TemporaryDirectory() as folder:
            place = Place(root=Path(folder), skills_dir=Path(folder))
            flow.listed = asyncio.run(list_tools(spec, place))
    except McpConnectError as exc:
        flow.error = str(exc)
    except Exception as exc:  # the SDK's own checks (state, iss, registration) end up here
        flow.error = f"{type(exc).__name__}: {exc}"
    finally:
        flow.url_ready.set()
        flow.finished.set()


# Flows waiting at once, in this process: per person and server one (a new sign-in cancels the
# one before), and at most this many in all (each holds a thread until its callback or timeout).
MAX_FLOWS = 50


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


def _room_for(user_id: int, server_pk: int) -> bool:
    """Cancel the person's earlier waiting sign-in to this server; False when the process
    already waits on MAX_FLOWS sign-ins."""
    with _flows_lock:
        for state, flow in list(_flows.items()):
            if (flow.user_id, flow.server_pk) == (user_id, server_pk):
                flow.code.cancel()
                del _flows[state]
        return len(_flows) < MAX_FLOWS


# The two views are async: each waits on the authorization server (the POST for it to start a
# sign-in, the callback for the token exchange, up to MCP_CONNECT_TIMEOUT + MCP_CALL_TIMEOUT).
# Under ASGI, Django runs every synchronous view of a process on one thread, so a synchronous
# wait here would pause every other page of the process until the server answered.


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
    _forget_old()
    try:
        await sync_to_async(check_public_url, thread_sensitive=False)(
            server.url, allow_private=settings.MCP_OAUTH_ALLOW_PRIVATE_ADDRESSES
        )
    except PrivateAddressRefused as exc:
        context["problem"] = str(exc)
        return await sync_to_async(_page)(request, context, 400)
    if not _room_for(uid, server.pk):
        context["problem"] = (
            "Too many sign-ins are waiting on this server right now; try again in a few minutes."
        )
        return await sync_to_async(_page)(request, context, 429)
    held = await sync_to_async(load_grant)(uid, server)
    # A fresh sign-in: the registration is kept, the old tokens are not.
    flow = _Flow(
        user_id=uid,
        server_pk=server.pk,
        grant=HeldGrant(client_info=held.client_info if held else None),
    )
    # The public URL, not the request's host: the registration keeps this one address.
    redirect_uri = f"{settings.SKILLSCOPE_PUBLIC_URL.rstrip('/')}{reverse('mcp-oauth-callback')}"
    threading.Thread(
        target=_run_flow, args=(flow, server, redirect_uri), daemon=True, name="mcp-oauth"
    ).start()
    await asyncio.to_thread(flow.url_ready.wait, settings.MCP_CONNECT_TIMEOUT + 5.0)
    state = _state_of(flow.auth_url)
    if flow.error or not state:
        flow.code.cancel()
        context["problem"] = flow.error or "The server did not start a sign-in in time."
        return await sync_to_async(_page)(request, context, 502)
    with _flows_lock:
        _flows[state] = flow
    states = await request.session.aget(_SESSION_KEY, [])
    await request.session.aset(_SESSION_KEY, [*states[-4:], state])
    return redirect(flow.auth_url)


@login_required
@require_http_methods(["GET"])
async def callback(request: HttpRequest) -> HttpResponse:
    """Where the authorization server sends the person back: only to a flow they started."""
    from mcp.client.auth import AuthorizationCodeResult

    user = await request.auser()
    uid = _uid(user)
    state = request.GET.get("state", "")
    mine = await request.session.aget(_SESSION_KEY, [])
    with _flows_lock:
        flow = _flows.get(state) if state in mine else None
        if flow is not None and flow.user_id != uid:
            flow = None
        if flow is not None:
            del _flows[state]
    if flow is None:
        return HttpResponseBadRequest("This sign-in was not started by you, or it expired.")
    await request.session.aset(_SESSION_KEY, [s for s in mine if s != state])
    server = await sync_to_async(get_object_or_404)(McpServer, pk=flow.server_pk)
    context: dict[str, object] = {"server": server, "signed_in": False, "problem": ""}
    if request.GET.get("error"):
        flow.code.cancel()
        context["problem"] = f"The server refused: {request.GET['error']}."
        return await sync_to_async(_page)(request, context, 400)
    flow.code.set_result(
        AuthorizationCodeResult(
            code=request.GET.get("code", ""), state=state, iss=request.GET.get("iss")
        )
    )
    await asyncio.to_thread(
        flow.finished.wait, settings.MCP_CONNECT_TIMEOUT + settings.MCP_CALL_TIMEOUT
    )
    if flow.error or flow.grant.tokens is None:
        context["problem"] = flow.error or "The sign-in did not finish in time."
        return await sync_to_async(_page)(request, context, 502)
    await sync_to_async(save_grant)(uid, server, flow.grant)
    # The sign-in listed the tools with the person's token: new or changed ones wait for review.
    await sync_to_async(store_listing)(server, flow.listed)
    context["signed_in"] = True
    return await sync_to_async(_page)(request, context)
