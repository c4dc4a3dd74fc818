"""The HTTP clients that reach MCP servers and their authorization servers.

`http_client` is the client factory `core.mcp.connect` is handed (`ServerSpec.http_clients`,
set by `servers.spec_for`): a client with the server's registered headers and the timeouts the
core asks for, on the process's one TLS context (`tls_context`). An OAuth server's client
carries the SDK's provider as its auth and goes through `GuardedTransport`: every connection
(discovery, registration, the token endpoint, the server itself, each redirect hop) to a
public address checked for that request, unless an admin allowed private ones, and never
through a proxy, not even one the environment names. It is a fresh client without cookies or
the app's headers, so Skillscope's session and the identity provider's token never reach a
server. `authorization_server_client` is the same guarded client for the sign-in flow's own
requests (`oauth`).
"""

from __future__ import annotations

import functools
import ipaddress
import socket
import ssl
from urllib.parse import urlsplit

import anyio
import httpx2

from skills_app.core.mcp.connect import HttpClientSpec


class PrivateAddressRefused(Exception):
    """An OAuth server's address (or one it pointed to) is not a public one."""


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


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The TLS settings of every MCP client, built once a process.

    The client's own default (`verify=True`, the CA bundle, SSL_CERT_FILE and SSL_CERT_DIR read
    from the environment), which httpx2 would otherwise build again for each client: loading
    the CA bundle took about half of a call on a new session (bench/RESULTS.md), and each
    session opens its own client. SSL_CERT_FILE or SSL_CERT_DIR changed later in the process is
    not seen until the process restarts."""
    return httpx2.create_ssl_context()


def http_client(spec: HttpClientSpec) -> httpx2.AsyncClient:
    """The client of one session with a Streamable HTTP server (`connect.HttpClients`)."""
    timeout = httpx2.Timeout(spec.connect_timeout, read=spec.read_timeout)
    if not spec.guarded:
        return httpx2.AsyncClient(headers=dict(spec.headers), timeout=timeout, verify=tls_context())
    # Only the server's own token goes out: a fresh client, no cookies, every connection's
    # address checked (discovery and redirects included), no proxy from the environment (it
    # would look the names up past the check).
    transport = GuardedTransport(allow_private=spec.allow_private, verify=tls_context())
    return httpx2.AsyncClient(
        headers=dict(spec.headers),
        timeout=timeout,
        transport=transport,
        trust_env=False,
        auth=spec.auth,
    )


def authorization_server_client(
    *, allow_private: bool, connect_timeout: float, read_timeout: float
) -> httpx2.AsyncClient:
    """A client for an authorization server's metadata, token and revocation endpoints: every
    request to a checked address, no proxy, no redirect followed (`GuardedTransport`)."""
    timeout = httpx2.Timeout(connect_timeout, read=read_timeout)
    transport = GuardedTransport(allow_private=allow_private, verify=tls_context())
    return httpx2.AsyncClient(transport=transport, timeout=timeout, follow_redirects=False)
