"""The websocket Origin check: the site's own origin only, by the rule Django's CSRF check uses.

Channels' AllowedHostsOriginValidator compares only the host name, so `http://127.0.0.1:1` or
`https://127.0.0.1` (another port, another scheme: another origin, maybe another program on
the machine) could open a signed-in user's socket. Here an Origin is accepted when it is exactly
`<scheme>://<host>`, where host is the request's Host header (validated against ALLOWED_HOSTS,
or X-Forwarded-Host when USE_X_FORWARDED_HOST) and scheme is the one the connection used (wss is
https; SECURE_PROXY_SSL_HEADER counts as for HTTP), or when it is one of CSRF_TRUSTED_ORIGINS
(exact, or `https://*.example.com` for subdomains), as `CsrfViewMiddleware._origin_verified`
decides for a POST.

A browser always sends Host. Without one (a test client), the server address of the scope is
used, and without that the Origin must name an allowed host with the scheme's default port.
No Origin at all is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

from asgiref.typing import ASGI3Application, ASGIReceiveCallable, ASGISendCallable
from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from django.utils.http import is_same_domain

if TYPE_CHECKING:
    # The scope and application types of typeshed's Channels stubs (as its OriginValidator's).
    from channels.consumer import _ChannelScope
    from channels.utils import _ChannelApplication

DEFAULT_PORTS = {"http": 80, "https": 443}


def _headers(scope: Mapping[str, Any]) -> dict[str, str]:
    found: dict[str, str] = {}
    for name, value in scope.get("headers") or []:
        key = name.decode("latin-1").lower()
        if key not in found:  # the first of a repeated header, as Django reads META
            found[key] = value.decode("latin-1")
    return found


def _is_secure(scope: Mapping[str, Any], headers: dict[str, str]) -> bool:
    if scope.get("scheme") in ("wss", "https"):
        return True
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy:
        meta_name, expected = proxy
        header = meta_name.removeprefix("HTTP_").replace("_", "-").lower()
        value = headers.get(header, "")
        return bool(value.split(",", 1)[0].strip() == expected)
    return False


def _host(scope: Mapping[str, Any], headers: dict[str, str], secure: bool) -> str | None:
    """The request's host (with a non-default port) as Django's get_host gives it, or None."""
    if settings.USE_X_FORWARDED_HOST and headers.get("x-forwarded-host"):
        host = headers["x-forwarded-host"].split(",", 1)[0].strip()
    elif headers.get("host"):
        host = headers["host"]
    elif scope.get("server"):
        name, port = scope["server"][0], scope["server"][1]
        default = DEFAULT_PORTS["https" if secure else "http"]
        host = str(name) if port in (None, default) else f"{name}:{port}"
    else:
        return None
    domain, _port = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return ""
    return host


def origin_allowed(scope: Mapping[str, Any]) -> bool:
    """True when the websocket's Origin is the site's own (see the module docstring)."""
    headers = _headers(scope)
    origin = headers.get("origin")
    if not origin or origin == "null":
        return False
    secure = _is_secure(scope, headers)
    scheme = "https" if secure else "http"
    host = _host(scope, headers, secure)
    if host and origin == f"{scheme}://{host}":
        return True
    trusted = list(getattr(settings, "CSRF_TRUSTED_ORIGINS", []))
    if origin in trusted:
        return True
    try:
        parsed = urlsplit(origin)
        port = parsed.port
    except ValueError:
        return False
    for entry in trusted:
        if "*" in entry:
            allowed = urlsplit(entry)
            if parsed.scheme == allowed.scheme and is_same_domain(
                parsed.netloc, allowed.netloc.replace("*", "", 1)
            ):
                return True
    if host is None:
        # No Host and no server address (not a browser): the scheme must be the connection's
        # and the host an allowed one, on the scheme's default port.
        return (
            parsed.scheme == scheme
            and port is None
            and not parsed.path
            and bool(parsed.hostname)
            and validate_host(split_domain_port(parsed.netloc)[0], settings.ALLOWED_HOSTS)
            and origin == f"{scheme}://{parsed.netloc}"
        )
    return False


class SameOriginValidator:
    """ASGI middleware: closes a websocket whose Origin is not the site's own, before anything else."""

    def __init__(self, application: _ChannelApplication) -> None:
        # Channels' middleware stacks are ASGI 3 applications; the stubs' alias also admits
        # ASGI 2's one-argument form, which Channels no longer calls.
        self.application = cast("ASGI3Application", application)

    async def __call__(
        self, scope: _ChannelScope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> Any:
        if scope.get("type") == "websocket" and not origin_allowed(scope):
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)
