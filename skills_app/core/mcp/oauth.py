"""OAuth 2.1 for Streamable HTTP servers, through the SDK's `OAuthClientProvider`.

The SDK does the protocol: discovery of the protected resource and authorization server
metadata, dynamic registration, PKCE (S256), the `state` check, the authorization-response `iss`
check (RFC 9207), the `resource` parameter (RFC 8707) and refreshing. What this module adds:

- `HeldGrant`, the SDK's `TokenStorage` over what one person holds for one server, in memory:
  the caller loads it from the database before and saves it after (`changed`), so the SDK's
  flow never touches the database from inside a request to the server.
- `SignInRequired`, raised where the SDK would send a person to the authorization page during a
  tool call: a call cannot wait for a person, so it ends with an error result naming the page.
- `GuardedTransport`, which refuses every connection (discovery, registration, token, the
  server itself, and each redirect hop, since each goes through the transport) to a private,
  loopback, link-local or otherwise non-public address unless `allow_private` is set: the name
  is looked up once per request and the request goes to the address checked, and no proxy
  is used, not even one the environment names.

Only the server's own token is sent: the client is a fresh httpx2 client without cookies or the
app's headers, so Skillscope's session and the identity provider's token never reach a server.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlsplit

import anyio
import httpx2

# The SDK is imported where a sign-in or a call needs it (see `connect`: 0.8 s of CPU that
# Django's start-up would otherwise pay in every process).
if TYPE_CHECKING:
    from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
    from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

CLIENT_NAME = "Skillscope"


class _QuietSignIn(logging.Filter):
    """The SDK logs every failed OAuth flow with its traceback; a call ended by SignInRequired is
    the expected way a person is asked to sign in, not an error worth a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, SignInRequired)


class PrivateAddressRefused(Exception):
    """An OAuth server's address (or one it pointed to) is not a public one."""


class SignInRequired(Exception):
    """The person has no usable token for the server; they must sign in on its page first."""


@dataclass(slots=True)
class HeldGrant:
    """The SDK's `TokenStorage` for one (person, server): tokens and the client registration."""

    tokens: OAuthToken | None = None
    client_info: OAuthClientInformationFull | None = None
    changed: bool = False

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens, self.changed = tokens, True

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info, self.changed = client_info, True

    @property
    def issuer(self) -> str:
        """The authorization server the registration belongs to ("" before one was made)."""
        return (self.client_info.issuer or "") if self.client_info is not None else ""


logging.getLogger("mcp.client.auth.oauth2").addFilter(_QuietSignIn())


class GrantStore(Protocol):
    """One person's stored grant for one server, as a call reaches it (`skills_app.mcp.oauth`)."""

    @property
    def sign_in_url(self) -> str: ...

    @property
    def allow_private(self) -> bool: ...

    async def load(self) -> HeldGrant | None: ...

    async def save(self, grant: HeldGrant) -> None: ...


def sign_in_message(server: str, url: str) -> str:
    """The error result a call gets when its person must sign in to the server first."""
    return (
        f'The MCP server "{server}" needs the user to sign in to it before its tools can be '
        f"used. Tell the user to open {url} , sign in there, and then ask again. The tool was "
        "not called."
    )


@dataclass(frozen=True, slots=True)
class OAuthSetup:
    """What a client needs to speak OAuth to one server for one person."""

    grant: HeldGrant
    redirect_uri: str
    allow_private: bool = False
    # The page where the person signs in to this server (named in SignInRequired's message).
    sign_in_url: str = ""
    # Called with the authorization URL and awaited for the redirect's parameters: set only by
    # the sign-in flow (`skills_app.mcp.oauth`); a tool call has none and gets SignInRequired.
    redirect: Callable[[str], Awaitable[None]] | None = None
    callback: Callable[[], Awaitable[AuthorizationCodeResult]] | None = None


def provider(server_url: str, setup: OAuthSetup) -> OAuthClientProvider:
    """The SDK's provider for one server and one person's held grant."""
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import OAuthClientMetadata

    metadata = OAuthClientMetadata(
        client_name=CLIENT_NAME,
        redirect_uris=[setup.redirect_uri],  # type: ignore[list-item]  # pydantic parses it
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
        application_type="web",
    )

    async def refuse(url: str) -> None:
        raise SignInRequired(url)

    async def no_callback() -> AuthorizationCodeResult:  # never reached: `refuse` raises first
        raise SignInRequired("")

    return OAuthClientProvider(
        server_url=server_url,
        client_metadata=metadata,
        storage=setup.grant,
        redirect_handler=setup.redirect or refuse,
        callback_handler=setup.callback or no_callback,
    )


def public_address(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether an address is a public (global unicast) one."""
    return address.is_global and not address.is_multicast


def public_addresses(host: str, port: int) -> list[str]:
    """`host`'s addresses from one name lookup, in the resolver's order; PrivateAddressRefused
    when the lookup fails or any answer is not a public address."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except OSError as exc:
        raise PrivateAddressRefused(f"The host {host} could not be resolved: {exc}.") from None
    found = list(dict.fromkeys(str(info[4][0]) for info in infos))
    for text in found:
        if not public_address(ipaddress.ip_address(text.partition("%")[0])):
            raise PrivateAddressRefused(
                f"{host} is a private, loopback or link-local address ({text}); OAuth "
                "discovery and redirects go to public addresses only (an admin may allow "
                "private ones with MCP_OAUTH_ALLOW_PRIVATE_ADDRESSES)"
            )
    return found


def check_public_url(url: str, *, allow_private: bool) -> None:
    """Raise PrivateAddressRefused when `url`'s host is (or resolves to) a non-public address.

    For a URL that is only shown (the authorization page the browser is sent to) or checked
    early; what this process connects to is checked per request (`GuardedTransport`)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PrivateAddressRefused(f"{url!r} is not an http(s) address.")
    if not allow_private:
        public_addresses(parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))


class GuardedTransport(httpx2.AsyncBaseTransport):
    """The OAuth client's httpx2 transport: every request (to the server, discovery,
    registration, the token endpoint, each redirect hop) goes to an address checked for it,
    unless `allow_private`, and never through a proxy, not even one named by HTTP(S)_PROXY in
    the environment: a proxy would look the name up itself, past the check.

    The host is looked up once per request, every answer checked, and the request sent to the
    checked address itself: a check that looked the name up and then let the connection look
    it up again would be beaten by a name server that answers a public address to the first
    lookup and a private one to the second (DNS rebinding). The Host header keeps the name, and
    so does TLS: httpcore's `sni_hostname` request extension is the name the certificate is
    checked against. Connections are pooled per address, so a kept connection is one to a
    checked address too."""

    def __init__(self, *, allow_private: bool, verify: ssl.SSLContext) -> None:
        self.allow_private = allow_private
        self.inner = httpx2.AsyncHTTPTransport(verify=verify, trust_env=False, proxy=None)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if self.allow_private:
            return await self.inner.handle_async_request(request)
        host = request.url.host
        port = request.url.port or (443 if request.url.scheme == "https" else 80)
        addresses = await anyio.to_thread.run_sync(public_addresses, host, port)
        failed: httpx2.TransportError | None = None
        for address in addresses:
            # A copy goes out: the client's own request keeps its URL (redirects are joined to
            # it, and the response names it).
            pinned = httpx2.Request(
                request.method,
                request.url.copy_with(host=address),
                headers=request.headers,
                stream=request.stream,
                extensions={**request.extensions, "sni_hostname": host},
            )
            try:
                return await self.inner.handle_async_request(pinned)
            except (httpx2.ConnectError, httpx2.ConnectTimeout) as exc:
                failed = exc  # the next checked address, as a connection would try it
        assert failed is not None  # public_addresses names at least one address
        raise failed

    async def aclose(self) -> None:
        await self.inner.aclose()
