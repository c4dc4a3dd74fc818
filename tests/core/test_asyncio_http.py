"""The model client's network backend on asyncio transports (`core/asyncio_http.py`).

The real SDK against the fake Anthropic server over plain HTTP and over HTTPS with a
certificate made here (verification on: an untrusted or mismatched certificate is refused),
timeouts that still fire (a server that stops sending), the backend's read contract on
raw loopback servers (at most max_bytes, everything in order, b"" at the end, one deadline per
read whatever the reads before it waited), and proxies from the environment (HTTP_PROXY,
NO_PROXY) honoured as the SDK's own client honours them.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anthropic
import httpcore2
import httpx2
import pytest

from skills_app.core.asyncio_http import AsyncioBackend
from skills_app.core.http11 import http_client
from skills_app.core.llm import AnthropicModel, ModelError, ModelRequest, TextDelta
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


# -- the real SDK through the backend ------------------------------------------------------------


async def test_the_model_client_connects_through_the_asyncio_backend(
    fake_anthropic: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    fake_anthropic.enqueue(Reply.text("Hello over asyncio", chunk=3))
    with caplog.at_level(logging.DEBUG, logger="skills_app.core.http11"):
        assert await text_of(model(fake_anthropic.base_url)) == "Hello over asyncio"
    connected = [r.getMessage() for r in caplog.records if r.name == "skills_app.core.http11"]
    assert len(connected) == 1 and "over TCP (AsyncioStream)" in connected[0], connected


async def test_the_bare_sdk_streams_through_http_client(
    fake_anthropic: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    fake_anthropic.enqueue(Reply.text("one two three four", chunk=2), Reply.text("again"))
    client = anthropic.AsyncAnthropic(
        api_key="k", base_url=fake_anthropic.base_url, max_retries=0, http_client=http_client()
    )
    with caplog.at_level(logging.DEBUG, logger="skills_app.core.http11"):
        for expected in ("one two three four", "again"):  # the second on the kept-alive connection
            async with client.messages.stream(
                model=TEST_MODEL, max_tokens=64, messages=[{"role": "user", "content": "hi"}]
            ) as stream:
                assert await stream.get_final_text() == expected
    await client.close()
    assert len([r for r in caplog.records if r.name == "skills_app.core.http11"]) == 1


async def test_https_with_a_certificate_of_a_trusted_authority(
    trusted: Authority, caplog: pytest.LogCaptureFixture
) -> None:
    with FakeAnthropic(tls=trusted.server_context("127.0.0.1")) as fake:
        fake.enqueue(Reply.text("Sealed and delivered", chunk=4))
        assert fake.base_url.startswith("https://")
        with caplog.at_level(logging.DEBUG, logger="skills_app.core.http11"):
            assert await text_of(model(fake.base_url)) == "Sealed and delivered"
        assert len(fake.requests) == 1
    tls = [r.getMessage() for r in caplog.records if r.name == "skills_app.core.http11"]
    assert len(tls) == 1 and "over TLS (AsyncioStream)" in tls[0], tls


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
    # Mid-stream the SDK lets httpx's own timeout through (before the answer: APITimeoutError).
    assert any(isinstance(e, httpx2.ReadTimeout) for e in causes(error))


async def test_a_stream_cut_over_https_keeps_the_partial_text(trusted: Authority) -> None:
    # The server drops the connection mid-answer without TLS's close_notify (a ragged end).
    with FakeAnthropic(tls=trusted.server_context("127.0.0.1")) as fake:
        fake.enqueue(Reply.text("Hello world, cut here", chunk=4, cut_after_events=5))
        error = await failure(model(fake.base_url))
    assert error.kind == "stream_cut"
    assert error.partial_content == [{"type": "text", "text": "Hello wo"}]


async def test_a_server_that_never_answers_times_out() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # reads the request and answers nothing until the client leaves
        writer.close()

    async for port in serve(silent):
        error = await failure(model(f"http://127.0.0.1:{port}", timeout=0.3))
        assert error.kind == "timeout"


async def test_the_sdk_retries_a_read_timeout_as_it_always_did() -> None:
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
        assert requests == 2  # the first try and one retry, each on a new connection


# -- the read contract ---------------------------------------------------------------------------


async def test_reads_return_at_most_max_bytes_everything_in_order_then_the_end() -> None:
    body = bytes(range(256)) * (3 * 4096)  # 3 MB: more than the backend buffers unread

    async def blast(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(body)
        await writer.drain()
        writer.close()

    async for port in serve(blast):
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
        received, sizes = bytearray(), []
        while data := await stream.read(65536, timeout=5):
            sizes.append(len(data))
            received += data
        assert bytes(received) == body
        assert max(sizes) <= 65536
        assert await stream.read(65536, timeout=5) == b""  # the end stays the end
        assert stream.get_extra_info("is_readable") is True  # the pool drops such a connection
        await stream.aclose()


async def test_a_read_times_out_when_nothing_arrives() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    async for port in serve(silent):
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
        assert stream.get_extra_info("is_readable") is False  # idle, open: reusable
        with pytest.raises(httpcore2.ReadTimeout):
            await stream.read(1024, timeout=0.2)
        await stream.aclose()


async def test_each_read_has_its_own_deadline() -> None:
    # 20 bytes 50 ms apart: a second in all, each read well within its 0.5 s.
    async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for i in range(20):
            await asyncio.sleep(0.05)
            writer.write(bytes([i]))
        writer.close()

    async for port in serve(trickle):
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
        received = bytearray()
        while data := await stream.read(1024, timeout=0.5):
            received += data
        assert bytes(received) == bytes(range(20))
        await stream.aclose()


async def test_a_read_without_a_limit_outlives_an_earlier_reads_deadline() -> None:
    async def late(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(0.05)
        writer.write(b"a")
        await asyncio.sleep(0.6)  # past the first read's 0.3 s deadline
        writer.write(b"b")
        writer.close()

    async for port in serve(late):
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
        assert await stream.read(1, timeout=0.3) == b"a"
        assert await stream.read(1, timeout=None) == b"b"
        await stream.aclose()


async def test_connecting_to_a_closed_port_is_a_connect_error() -> None:
    async def nothing(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    port = 0
    async for port in serve(nothing):  # noqa: B007 (the port is used after the server closed)
        pass  # the server is closed again: its port refuses connections
    with pytest.raises(httpcore2.ConnectError):
        await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)


async def test_a_unix_socket_connects_and_a_missing_one_is_a_connect_error(tmp_path) -> None:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(await reader.readexactly(4))
        await writer.drain()
        writer.close()

    path = str(tmp_path / "model.sock")
    server = await asyncio.start_unix_server(echo, path)
    try:
        stream = await AsyncioBackend().connect_unix_socket(path, timeout=5)
        await stream.write(b"ping", timeout=5)
        assert await stream.read(4, timeout=5) == b"ping"
        await stream.aclose()
    finally:
        server.close()
        await server.wait_closed()
    with pytest.raises(httpcore2.ConnectError):
        await AsyncioBackend().connect_unix_socket(str(tmp_path / "missing.sock"), timeout=5)


# -- proxies from the environment keep httpx's own transport -------------------------------------


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


async def test_a_proxy_from_the_environment_carries_the_model_call(
    fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[bytes] = []
    fake_anthropic.enqueue(Reply.text("Through the proxy", chunk=4))
    async for port in serve(await _forwarding_proxy(seen)):
        for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "HTTPS_PROXY"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")
        with caplog.at_level(logging.DEBUG, logger="skills_app.core.http11"):
            assert await text_of(model(fake_anthropic.base_url)) == "Through the proxy"
    assert seen == [f"POST {fake_anthropic.base_url}/v1/messages HTTP/1.1".encode()]
    # httpx's transport carried it, not the direct connections of core.http11.
    assert not [r for r in caplog.records if r.name == "skills_app.core.http11"]
    assert len(fake_anthropic.requests) == 1


async def test_no_proxy_keeps_the_direct_connection(
    fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[bytes] = []
    fake_anthropic.enqueue(Reply.text("Straight there", chunk=4))
    async for port in serve(await _forwarding_proxy(seen)):
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        with caplog.at_level(logging.DEBUG, logger="skills_app.core.http11"):
            assert await text_of(model(fake_anthropic.base_url)) == "Straight there"
    assert seen == []
    connected = [r.getMessage() for r in caplog.records if r.name == "skills_app.core.http11"]
    assert len(connected) == 1 and "over TCP (AsyncioStream)" in connected[0]
