"""The model client's network, on the SDK's aiohttp client: what docs/deploy.md promises of it.

The real SDK against the fake Anthropic server over HTTPS with a certificate made here,
verification on (trusted through SSL_CERT_FILE; an unknown authority or another host's
certificate is refused), a stream that stops or is cut over TLS, a server that never answers
(timed out, and retried as the SDK retries), and proxies from the environment (HTTP_PROXY,
NO_PROXY) honoured.
"""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest

from skills_app.core.events import TextDelta
from skills_app.core.llm import AnthropicModel, ModelError, ModelRequest
from tests.support.fake_anthropic import TEST_MODEL, FakeAnthropic, Reply
from tests.support.tls import Authority

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def request() -> ModelRequest:
    return ModelRequest(
        model=TEST_MODEL,
        system="",
        tools=[],
        messages=[{"role": "user", "content": "hi"}],
        max_tokens=256,
    )


def model(base_url: str, **options: Any) -> AnthropicModel:
    options.setdefault("max_retries", 0)
    return AnthropicModel(api_key="test-key", base_url=base_url, model=TEST_MODEL, **options)


async def text_of(client: AnthropicModel) -> str:
    return "".join(
        [event.text async for event in client.stream(request()) if isinstance(event, TextDelta)]
    )


async def failure(client: AnthropicModel) -> ModelError:
    with pytest.raises(ModelError) as caught:
        async for _ in client.stream(request()):
            pass
    return caught.value


def causes(error: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in found:
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


@pytest.fixture
def authority(tmp_path: Path) -> Authority:
    return Authority.make(tmp_path / "tls")


@pytest.fixture
def trusted(authority: Authority, monkeypatch: pytest.MonkeyPatch) -> Authority:
    """The test's authority trusted the way an operator trusts one: SSL_CERT_FILE."""
    monkeypatch.setenv("SSL_CERT_FILE", str(authority.ca_file))
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    return authority


async def serve(handler: Handler) -> AsyncIterator[int]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


# -- HTTPS -----------------------------------------------------------------------------------------


async def test_https_with_a_certificate_of_a_trusted_authority(trusted: Authority) -> None:
    with FakeAnthropic(tls=trusted.server_context("127.0.0.1")) as fake:
        fake.enqueue(Reply.text("Sealed and delivered", chunk=4))
        assert fake.base_url.startswith("https://")
        assert await text_of(model(fake.base_url)) == "Sealed and delivered"
        assert len(fake.requests) == 1


async def test_https_refuses_a_certificate_of_an_unknown_authority(
    authority: Authority, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    with FakeAnthropic(tls=authority.server_context("127.0.0.1")) as fake:
        fake.enqueue(Reply.text("must not be read"))
        error = await failure(model(fake.base_url))
        assert fake.requests == []
    assert error.kind == "connection"
    refused = [e for e in causes(error) if isinstance(e, ssl.SSLCertVerificationError)]
    assert refused and "unable to get local issuer certificate" in str(refused[0])


async def test_https_refuses_a_certificate_for_another_host(trusted: Authority) -> None:
    with FakeAnthropic(tls=trusted.server_context("api.example.org")) as fake:
        fake.enqueue(Reply.text("must not be read"))
        error = await failure(model(fake.base_url))
        assert fake.requests == []
    assert error.kind == "connection"
    refused = [e for e in causes(error) if isinstance(e, ssl.SSLCertVerificationError)]
    assert refused and "mismatch" in str(refused[0]).lower()


async def test_a_stream_that_stops_over_https_times_out(trusted: Authority) -> None:
    with FakeAnthropic(tls=trusted.server_context("127.0.0.1")) as fake:
        fake.enqueue(Reply.text("slow words here", chunk=5, delay=1.0))
        error = await failure(model(fake.base_url, timeout=0.3))
    assert error.kind == "timeout"
    # Mid-stream the SDK wraps the HTTP client's own timeout (the aiohttp transport raises it
    # as httpx's) in its APITimeoutError, which is what the adapter classifies.
    assert any(isinstance(e, httpx2.ReadTimeout) for e in causes(error))
    assert any(isinstance(e, anthropic.APITimeoutError) for e in causes(error))


async def test_a_stream_cut_over_https_keeps_the_partial_text(trusted: Authority) -> None:
    # The server drops the connection mid-answer without TLS's close_notify (a ragged end).
    with FakeAnthropic(tls=trusted.server_context("127.0.0.1")) as fake:
        fake.enqueue(Reply.text("Hello world, cut here", chunk=4, cut_after_events=5))
        error = await failure(model(fake.base_url))
    assert error.kind == "stream_cut"
    assert error.partial_content == [{"type": "text", "text": "Hello wo"}]


def _sse_chunk(event: str, data: dict[str, Any]) -> bytes:
    body = f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()
    return f"{len(body):x}\r\n".encode() + body + b"\r\n"


async def test_a_connection_reset_mid_answer_is_a_cut_with_the_text_kept() -> None:
    # A reset (RST, not the fake server's FIN) after a delta: aiohttp's payload error comes up
    # through the SDK as a connection error, after the answer began.
    message = {
        "id": "msg_reset",
        "type": "message",
        "role": "assistant",
        "model": TEST_MODEL,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }

    async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
            + _sse_chunk("message_start", {"type": "message_start", "message": message})
            + _sse_chunk(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            )
            + _sse_chunk(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": "Hello"},
                },
            )
        )
        await writer.drain()
        await asyncio.sleep(0.1)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    async for port in serve(reset):
        error = await failure(model(f"http://127.0.0.1:{port}"))
    assert error.kind == "stream_cut"
    assert error.partial_content == [{"type": "text", "text": "Hello"}]


# -- a server that never answers ----------------------------------------------------------------


async def test_a_server_that_never_answers_times_out() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # reads the request and answers nothing until the client leaves
        writer.close()

    async for port in serve(silent):
        error = await failure(model(f"http://127.0.0.1:{port}", timeout=0.3))
        assert error.kind == "timeout"


async def test_the_sdk_retries_a_read_timeout() -> None:
    requests = 0

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal requests
        await reader.readuntil(b"\r\n\r\n")
        requests += 1
        await reader.read()
        writer.close()

    async for port in serve(silent):
        error = await failure(model(f"http://127.0.0.1:{port}", timeout=0.2, max_retries=1))
        assert error.kind == "timeout"
        assert requests == 2  # the first try and one retry


# -- proxies from the environment --------------------------------------------------------------


async def _forwarding_proxy(seen: list[bytes]) -> Handler:
    """An HTTP proxy for plain-http targets: the request line in absolute form is recorded,
    rewritten to origin form and forwarded; the bytes then flow both ways until either side ends."""

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        line, rest = head.split(b"\r\n", 1)
        seen.append(line)
        method, target, version = line.split(b" ")
        url = httpx2.URL(target.decode())
        upstream_reader, upstream_writer = await asyncio.open_connection(url.host, url.port)
        upstream_writer.write(b" ".join([method, url.raw_path, version]) + b"\r\n" + rest)
        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))

    return handle


def _only_http_proxy(monkeypatch: pytest.MonkeyPatch, port: int) -> None:
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("http_proxy", raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")


async def test_a_proxy_from_the_environment_carries_the_model_call(
    fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[bytes] = []
    fake_anthropic.enqueue(Reply.text("Through the proxy", chunk=4))
    async for port in serve(await _forwarding_proxy(seen)):
        _only_http_proxy(monkeypatch, port)
        assert await text_of(model(fake_anthropic.base_url)) == "Through the proxy"
    assert seen == [f"POST {fake_anthropic.base_url}/v1/messages HTTP/1.1".encode()]
    assert len(fake_anthropic.requests) == 1


async def test_no_proxy_keeps_the_direct_connection(
    fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[bytes] = []
    fake_anthropic.enqueue(Reply.text("Straight there", chunk=4))
    async for port in serve(await _forwarding_proxy(seen)):
        _only_http_proxy(monkeypatch, port)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        assert await text_of(model(fake_anthropic.base_url)) == "Straight there"
    assert seen == []
    assert len(fake_anthropic.requests) == 1
