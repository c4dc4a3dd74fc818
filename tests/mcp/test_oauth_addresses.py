"""Where an OAuth server's client connects: to the address that was checked, never to another
answer of a later name lookup (DNS rebinding), and never through a proxy named in the process's
environment (the proxy would do its own lookup, so the check would check nothing).

Two real HTTP listeners on loopback, on the same port: 127.0.0.2 plays a public address (the
test makes `is_global` say so for that one address) and 127.0.0.1 the private target an
attacker's name server points to after the check. A name resolver the test controls answers
for the made-up host `rebind.test`.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync

from skills_app.core.mcp import McpConnectError, ServerSpec, list_tools
from skills_app.core.mcp.connect import Place
from skills_app.core.mcp.oauth import HeldGrant, OAuthSetup
from skills_app.mcp.transport import http_client

HOST = "rebind.test"
PUBLIC = "127.0.0.2"  # the address the check sees (made "public" below)
PRIVATE = "127.0.0.1"  # where a second lookup would send the connection


class Recorder(ThreadingHTTPServer):
    """An HTTP listener that notes each request line it receives and answers 404."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.seen: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def do_any(handler) -> None:
                self.seen.append(handler.requestline)
                handler.send_response(404)
                handler.send_header("Content-Length", "0")
                handler.end_headers()

            do_GET = do_POST = do_DELETE = do_any

            def log_message(handler, *args: object) -> None:
                pass

        super().__init__(address, Handler)


def _listeners() -> tuple[Recorder, Recorder]:
    """Listeners on PUBLIC and PRIVATE with one port number (the URL names one port)."""
    for _ in range(20):
        public = Recorder((PUBLIC, 0))
        try:
            return public, Recorder((PRIVATE, public.server_address[1]))
        except OSError:  # the port is taken on 127.0.0.1: try another
            public.server_close()
    raise AssertionError("no port free on both loopback addresses")


@pytest.fixture
def listeners(monkeypatch) -> Iterator[tuple[Recorder, Recorder]]:
    public, private = _listeners()
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (public, private)]
    for thread in threads:
        thread.start()
    # The one address this test calls public; every other one keeps its real class.
    real_is_global = ipaddress.IPv4Address.is_global
    monkeypatch.setattr(
        ipaddress.IPv4Address,
        "is_global",
        property(lambda a: str(a) == PUBLIC or real_is_global.fget(a)),  # type: ignore[attr-defined]
    )
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    yield public, private
    for server in (public, private):
        server.shutdown()
        server.server_close()


def resolve_with(monkeypatch, answers: list[str]) -> list[str]:
    """Answer lookups of HOST with `answers` in turn (the last one from then on); other names
    resolve as usual. Returns the list of answers given."""
    real = socket.getaddrinfo
    given: list[str] = []

    def getaddrinfo(host, port, *args, **kwargs):  # type: ignore[no-untyped-def]
        name = host.decode() if isinstance(host, bytes) else host
        if name != HOST:
            return real(host, port, *args, **kwargs)
        address = answers[min(len(given), len(answers) - 1)]
        given.append(address)
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return given


def greet(port: int, tmp_path: Path) -> None:
    """Greet the OAuth server at HOST as a tool call would (the SDK's client, our transport);
    the listeners answer 404, so the greeting fails: where it went is what counts."""
    spec = ServerSpec(
        name="remote",
        kind="http",
        url=f"http://{HOST}:{port}/mcp",
        connect_timeout=2.0,
        call_timeout=5.0,
        oauth=OAuthSetup(grant=HeldGrant(), redirect_uri="https://skillscope.example/cb"),
        http_clients=http_client,
    )
    with pytest.raises(McpConnectError):
        async_to_sync(list_tools)(spec, Place(root=tmp_path, skills_dir=tmp_path))


def test_the_connection_goes_to_the_checked_address_not_to_a_second_lookups_answer(
    listeners, monkeypatch, tmp_path
):
    public, private = listeners
    given = resolve_with(monkeypatch, [PUBLIC, PRIVATE])
    greet(public.server_address[1], tmp_path)
    assert private.seen == []  # the rebinding answer was never connected to
    assert public.seen and public.seen[0].startswith("POST /mcp")
    assert given[0] == PUBLIC


def test_a_proxy_named_in_the_environment_is_not_used(listeners, monkeypatch, tmp_path):
    public, private = listeners
    resolve_with(monkeypatch, [PUBLIC])
    proxy = f"http://{PRIVATE}:{private.server_address[1]}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(name, proxy)
    greet(public.server_address[1], tmp_path)
    assert private.seen == []  # a proxy would have been sent "POST http://rebind.test:..."
    assert public.seen and public.seen[0].startswith("POST /mcp")
