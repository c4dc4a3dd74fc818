"""HTTP/1.1 for the model client, read with as little per-chunk work as a streamed answer needs.

Why: when the model writes at its own pace, every SSE event of a streamed answer arrives as one
HTTP chunk in its own TCP read, so what the client does per chunk is paid per delta. httpcore's
HTTP/1.1 connection hands each chunk through h11's event machinery and four async generators:
about a sixth of the CPU of a process relaying 100 live streams, more than all of Skillscope's
own per-delta code (bench/PROFILE.md, 2026-12-02). Here a response body is decoded by one loop
over the connection's buffer, and every complete chunk a read brought is handed up at once.

What is kept: httpx's client above (timeouts, redirects, the SDK's headers and retries), the
network streams of `asyncio_http` below (their read deadlines, TLS with the SSL context httpx
builds, certificate checks), keep-alive connections per origin with httpx's limits (at most
`max_connections` open, `max_keepalive_connections` idle for `keepalive_expiry` seconds), and
httpx's exceptions: a timeout is `httpx.ConnectTimeout`/`ReadTimeout`/`WriteTimeout`/
`PoolTimeout`, a failed connection `ConnectError`/`ReadError`/`WriteError`, and a response that
breaks HTTP/1.1 (a malformed head, a bad chunk, a body cut short) `RemoteProtocolError`, as
httpcore raised them, so the SDK retries and reports exactly as before.

Strict where it matters: the head and the trailer fields are at most 64 KB each, header names
are tokens, no value carries a line break, a request's own method or header with a CR or LF is
refused before anything is sent, and so is a request body longer or shorter than its
Content-Length; chunk sizes are hexadecimal, a Content-Length at most 20 digits, and only
`chunked`, once, is accepted as a transfer coding. A large chunk goes up as it arrives, never held
whole. A connection is reused only after the complete body of an HTTP/1.1 response with nothing
after it, framed by one header only, when neither the request nor the response asked to close.
"""

from __future__ import annotations

import asyncio
import logging
import math
import ssl
import time
from collections.abc import AsyncIterator, Iterable

import anthropic
import httpcore2
import httpx2
from anthropic._utils._httpx import get_environment_proxies

from .asyncio_http import (
    AsyncioBackend,
    AsyncioStream,
    AsyncioTransport,
    SocketOption,
    keepalive_options,
)
from .http11_wire import (
    MAX_CHUNK_LINE,
    MAX_HEAD_BYTES,
    READ_SIZE,
    Connection,
    Origin,
    as_httpx,
    broken,
    chunk_size,
    framing,
    read_head,
    request_head,
    send_body,
)

logger = logging.getLogger(__name__)


class Http11Transport(httpx2.AsyncBaseTransport):
    """httpx's transport interface over `AsyncioBackend` connections (see the module's docstring)."""

    def __init__(
        self,
        *,
        ssl_context: ssl.SSLContext,
        limits: httpx2.Limits = anthropic.DEFAULT_CONNECTION_LIMITS,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> None:
        self._ssl_context = ssl_context
        self._socket_options = list(socket_options or ())
        # httpx's None: no limit (and a keep-alive limit of 0: none kept).
        idle_limit = limits.max_keepalive_connections
        self._max_idle = 1 << 30 if idle_limit is None else idle_limit
        self._expiry = math.inf if limits.keepalive_expiry is None else limits.keepalive_expiry
        self._max_open = limits.max_connections or 1 << 30
        self._open = 0  # connections open, idle ones included
        # Set (and replaced) when a slot is freed or a connection goes back to the pool.
        self._available: asyncio.Event | None = None
        self._closed = False
        self._idle: dict[Origin, list[Connection]] = {}
        self._backend = AsyncioBackend()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        timeouts = request.extensions.get("timeout", {})
        url = request.url
        if url.scheme not in ("http", "https"):
            raise httpx2.UnsupportedProtocol(f"no HTTP/1.1 transport for {url.scheme!r} URLs")
        origin = (url.raw_scheme, url.raw_host, url.port or (443 if url.scheme == "https" else 80))
        head = request_head(request)  # a bad header fails before a connection is taken
        with as_httpx(request):
            connection = await self._acquire(origin, timeouts)
            try:
                unsent: httpcore2.WriteError | None = None
                try:
                    await connection.stream.write(head, timeouts.get("write"))
                    await send_body(connection.stream, request, timeouts.get("write"))
                except httpcore2.WriteError as exc:
                    # A server may answer (413, ...) and close before it read the whole body:
                    # that answer is still read, as httpcore does; without one, the write failed.
                    unsent = exc
                try:
                    status, reason, headers, keep_alive = await read_head(
                        connection, timeouts.get("read")
                    )
                except (httpcore2.ReadError, httpcore2.RemoteProtocolError):
                    if unsent is None:
                        raise
                    raise unsent from None
                keep_alive &= unsent is None
                ends = framing(request, headers, status)
                # The server closes after answering a request that asked it to.
                keep_alive &= "close" not in request.headers.get("connection", "").lower()
            except BaseException:
                await self._discard(connection)
                raise
        body = _Body(self, connection, origin, request, ends, keep_alive)
        return httpx2.Response(
            status,
            headers=headers,
            stream=body,
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": reason},
        )

    async def aclose(self) -> None:
        # A response still being read closes its connection when it ends (see `release`).
        self._closed = True
        idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                await self._discard(connection)

    # -- the pool ---------------------------------------------------------------------------

    def _idle_connection(self, origin: Origin) -> Connection | None:
        connections = self._idle.get(origin)
        now = time.monotonic()
        while connections:
            connection = connections.pop()
            if connection.reusable() and now - connection.idle_since < self._expiry:
                return connection
            self._drop_soon(connection)
        return None

    async def _acquire(self, origin: Origin, timeouts: dict[str, float | None]) -> Connection:
        """A kept-alive connection to `origin`, else a new one once the pool has room (an idle
        connection to another origin is closed to make it); PoolTimeout after `pool` seconds."""
        try:
            async with asyncio.timeout(timeouts.get("pool")):
                while (connection := self._idle_connection(origin)) is None:
                    if self._open >= self._max_open:
                        self._drop_an_idle_connection()
                    if self._open < self._max_open:
                        break
                    if self._available is None:
                        self._available = asyncio.Event()
                    await self._available.wait()
        except TimeoutError:
            raise httpcore2.PoolTimeout("no connection became free in time") from None
        if connection is not None:
            return connection
        self._open += 1  # no await since the check above: the slot is this request's
        return await self._connect(origin, timeouts)

    async def _connect(self, origin: Origin, timeouts: dict[str, float | None]) -> Connection:
        """A new connection in the slot taken for it (given back if it fails)."""
        try:
            scheme, host, port = origin
            connect_timeout = timeouts.get("connect")
            stream = await self._backend.connect_tcp(
                host.decode("ascii"), port, connect_timeout, None, self._socket_options
            )
            if scheme == b"https":
                tls = await stream.start_tls(
                    self._ssl_context, host.decode("ascii"), connect_timeout
                )
                assert isinstance(tls, AsyncioStream)
                stream = tls
        except BaseException:
            self._free_slot()
            raise
        assert isinstance(stream, AsyncioStream)
        logger.debug(
            "connected to %s:%s over %s (%s)",
            host.decode("ascii"),
            port,
            "TLS" if scheme == b"https" else "TCP",
            type(stream).__name__,
        )
        return Connection(stream)

    def _drop_an_idle_connection(self) -> None:
        for origin, connections in list(self._idle.items()):
            if connections:
                self._drop_soon(connections.pop(0))  # the one idle longest
                return
            del self._idle[origin]

    def _wake(self) -> None:
        available, self._available = self._available, None
        if available is not None:
            available.set()

    def _free_slot(self) -> None:
        self._open -= 1
        self._wake()

    def release(self, origin: Origin, connection: Connection) -> None:
        """A response was read to its end on a connection that may serve the next."""
        idle = self._idle.setdefault(origin, [])
        if self._closed or len(idle) >= self._max_idle or not connection.reusable():
            self._drop_soon(connection)
            return
        connection.idle_since = time.monotonic()
        idle.append(connection)
        self._wake()  # a request waiting for the pool may take it

    async def _discard(self, connection: Connection) -> None:
        self._free_slot()
        await connection.stream.aclose()

    def _drop_soon(self, connection: Connection) -> None:
        self._free_slot()
        connection.stream.close_now()


class _Body(httpx2.AsyncByteStream):
    """A response's body as it arrives: the connection goes back to the pool once it ended."""

    def __init__(
        self,
        pool: Http11Transport,
        connection: Connection,
        origin: Origin,
        request: httpx2.Request,
        framing: tuple[str, int],
        keep_alive: bool,
    ) -> None:
        self._pool, self._connection, self._origin = pool, connection, origin
        self._request = request
        self._timeout = request.extensions.get("timeout", {}).get("read")
        self._framing, self._length = framing
        self._keep_alive = keep_alive and self._framing != "close"
        self._done = False
        self._closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with as_httpx(self._request):
            if self._framing == "chunked":
                parts = self._chunked()
            elif self._framing == "length":
                parts = self._sized(self._length)
            else:
                parts = self._until_close()
            async for part in parts:
                yield part
        self._done = True
        await self.aclose()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._done and self._keep_alive:
            self._pool.release(self._origin, self._connection)
        else:
            await self._pool._discard(self._connection)

    async def _sized(self, length: int) -> AsyncIterator[bytes]:
        connection = self._connection
        left = length
        while left:
            data = connection.buffer or await connection.read(self._timeout)
            connection.buffer = data[left:]
            data = data[:left]
            left -= len(data)
            yield data

    async def _until_close(self) -> AsyncIterator[bytes]:
        connection = self._connection
        if connection.buffer:
            data, connection.buffer = connection.buffer, b""
            yield data
        while data := await connection.stream.read(READ_SIZE, self._timeout):
            yield data

    async def _chunked(self) -> AsyncIterator[bytes]:
        """Chunked transfer coding: every complete chunk in the buffer goes up in one piece.

        A chunk that is not all in yet goes up as far as it came (a server's chunk of any
        size is not held whole), and the buffer is read by an offset, not sliced per chunk:
        a read of many tiny chunks costs its length, not its length times their number."""
        connection = self._connection
        buffer, at = connection.buffer, 0
        left = -1  # bytes of the current chunk's data still to come; -1: a size line is next
        while True:
            parts: list[bytes] = []
            while True:
                if left >= 0:
                    if left:
                        data = buffer[at : at + left]
                        if data:
                            parts.append(data)
                            at += len(data)
                            left -= len(data)
                        if left:
                            break
                    if len(buffer) < at + 2:
                        break
                    if buffer[at : at + 2] != b"\r\n":
                        raise broken("a chunk does not end where its size says")
                    at += 2
                    left = -1
                line_end = buffer.find(b"\r\n", at, at + MAX_CHUNK_LINE + 2)
                if line_end < 0:
                    if len(buffer) - at > MAX_CHUNK_LINE:
                        raise broken("a chunk size line is too long")
                    break
                size = chunk_size(buffer[at:line_end])
                at = line_end + 2
                if size == 0:
                    buffer = await self._trailers(buffer[at:])
                    connection.buffer = buffer
                    if parts:
                        yield b"".join(parts)
                    return
                left = size
            if parts:
                yield parts[0] if len(parts) == 1 else b"".join(parts)
            # What is kept is at most a size line or a chunk's CRLF: no copy of a large chunk.
            buffer = buffer[at:] + await connection.read(self._timeout)
            at = 0

    async def _trailers(self, buffer: bytes) -> bytes:
        """Skip the trailer fields after the last chunk (at most a head's size in all); what
        follows them is kept."""
        start = 0  # where the next line starts: the buffer is not copied per line
        while True:
            line_end = buffer.find(b"\r\n", start)
            if line_end == start:
                return buffer[start + 2 :]
            if (len(buffer) if line_end < 0 else line_end) > MAX_HEAD_BYTES:
                raise broken("the trailer fields are too long")
            if line_end < 0:
                buffer += await self._connection.read(self._timeout)
                continue
            start = line_end + 2


def http_client(*, verify: ssl.SSLContext | bool = True, lean: bool = True) -> httpx2.AsyncClient:
    """The SDK's default HTTP client, with direct connections on `AsyncioBackend`: through
    this module's HTTP/1.1 (`lean`, the default) or httpcore's (the benchmarks compare them).

    What the SDK's `DefaultAsyncHttpxClient` sets up is kept: its timeout, limits and
    redirects, TCP keep-alive, and the proxies of the environment (HTTPS_PROXY, NO_PROXY, ...),
    which go through httpx's own transport.
    """
    options = keepalive_options()
    proxies = {
        pattern: None
        if url is None
        else httpx2.AsyncHTTPTransport(proxy=url, socket_options=options)
        for pattern, url in get_environment_proxies().items()
    }
    transport: httpx2.AsyncBaseTransport
    if lean:
        context = httpx2.create_ssl_context(verify=verify)
        transport = Http11Transport(ssl_context=context, socket_options=options)
    else:
        transport = AsyncioTransport(verify=verify, socket_options=options)
    client: httpx2.AsyncClient = anthropic.DefaultAsyncHttpxClient(
        transport=transport, mounts=proxies
    )
    return client


__all__ = ["Http11Transport", "http_client"]
