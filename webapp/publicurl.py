"""The one public URL of this Skillscope: what people type, and what everything printed starts with.

`SKILLSCOPE_PUBLIC_URL` when set (behind a proxy: the proxy's https:// address); otherwise the
address `manage.py runserver` listens on, `SKILLSCOPE_ADDR` (default 127.0.0.1:8000), as a URL.
No Django here: `scripts/run.sh` prints it before Django starts (`python -m webapp.publicurl`).
"""

from __future__ import annotations

import ipaddress
import os
import re
import sys
from collections.abc import Mapping
from urllib.parse import urlsplit

DEFAULT_ADDR = "127.0.0.1:8000"
# runserver's forms: PORT, HOST:PORT, [IPv6]:PORT (HOST a name or an IPv4 address).
_ADDR = re.compile(r"(?:(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):)?(?P<port>\d{1,5})\Z")
# A server bound to every interface is reached on this machine through the loopback address.
_WILDCARDS = {"0.0.0.0": "127.0.0.1", "0": "127.0.0.1", "[::]": "[::1]"}


class PublicURLError(ValueError):
    """A public URL or listen address that cannot be used, with what to write instead."""


def url_from_addr(addr: str) -> str:
    """The http:// URL of a runserver address (`8001`, `0.0.0.0:8000`, `[::1]:8000`)."""
    match = _ADDR.match(addr.strip())
    if not match or not 0 < int(match["port"]) < 65536:
        raise PublicURLError(
            f"SKILLSCOPE_ADDR={addr!r} is not an address to listen on: write PORT, HOST:PORT "
            "or [IPv6]:PORT, e.g. 127.0.0.1:8000"
        )
    host = match["host"] or "127.0.0.1"
    host = _WILDCARDS.get(host, host)
    return f"http://{host}:{int(match['port'])}"


def normalise(url: str) -> str:
    """URL as scheme://host[:port] without a trailing slash; PublicURLError when it is not one."""
    parts = urlsplit(url.strip())
    hint = "write it as https://host or http://host:port, e.g. https://skills.example.com"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PublicURLError(f"SKILLSCOPE_PUBLIC_URL={url!r} is not an http(s) URL: {hint}")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise PublicURLError(
            f"SKILLSCOPE_PUBLIC_URL={url!r} has more than a scheme and host: {hint}"
        )
    if parts.path not in ("", "/"):
        raise PublicURLError(
            f"SKILLSCOPE_PUBLIC_URL={url!r} has a path: Skillscope is served from the root of its "
            f"host; {hint}"
        )
    try:
        port = parts.port
    except ValueError:
        raise PublicURLError(f"SKILLSCOPE_PUBLIC_URL={url!r} has an invalid port: {hint}") from None
    host = parts.hostname.lower()
    try:
        if ipaddress.ip_address(host).version == 6:
            host = f"[{host}]"
    except ValueError:
        pass
    default_port = {"http": 80, "https": 443}[parts.scheme]
    suffix = f":{port}" if port is not None and port != default_port else ""
    return f"{parts.scheme}://{host}{suffix}"


def public_url(environ: Mapping[str, str]) -> str:
    """SKILLSCOPE_PUBLIC_URL when set, else the URL of SKILLSCOPE_ADDR (or 127.0.0.1:8000)."""
    explicit = (environ.get("SKILLSCOPE_PUBLIC_URL") or "").strip()
    if explicit:
        return normalise(explicit)
    return url_from_addr((environ.get("SKILLSCOPE_ADDR") or "").strip() or DEFAULT_ADDR)


def host_of(url: str) -> str:
    """The host of a normalised URL as ALLOWED_HOSTS writes it (IPv6 in brackets, no port)."""
    netloc = urlsplit(url).netloc
    if netloc.startswith("["):
        return netloc[: netloc.index("]") + 1]
    return netloc.split(":", 1)[0]


def main() -> int:
    try:
        print(public_url(os.environ))
    except PublicURLError as exc:
        print(exc, file=sys.stderr)
        return 78  # EX_CONFIG, as the settings use
    return 0


if __name__ == "__main__":
    sys.exit(main())
