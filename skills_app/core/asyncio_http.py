"""The model client's network layer on asyncio's own transports (an httpcore network backend).

Why: a streamed answer arrives one small SSE event per TCP read when the model writes at its
own pace, so what the HTTP stack costs per read is paid per delta. httpcore's default backend
(anyio) resumes and pauses the transport around every read (two `epoll_ctl` calls) and arms and
cancels a timer per read for its timeout: about half of the SDK's read path at 100 live streams
in one process (bench/PROFILE.md). Here the transport reads continuously into a buffer (paused
only when a reader falls far behind), a read returns what is buffered, and a waiting read
checks one deadline per connection, re-armed only when it is reached, instead of a timer each.

The semantics stay httpcore's: `read` returns at most `max_bytes`, b"" at the end of the
stream, and raises ReadTimeout when no byte arrived within `timeout` seconds of the call;
connect, TLS and write failures raise the httpcore exceptions the SDK maps to its own
(`APIConnectionError`, `APITimeoutError`). TLS is asyncio's (`loop.start_tls`) with the SSL
context httpx builds, so certificates are verified exactly as before.

`core.http11.http_client` builds the SDK's default client (its limits, timeouts, keep-alive
socket options and proxies from the environment) on these streams for direct connections;
proxied ones keep httpx's own transport.
"""

from __future__ import annotations

import asyncio
import math
import socket
import ssl
from collections import deque
from collections.abc import Coroutine, Iterable
from typing import Any

import anthropic
import httpcore2
import httpx2

# Socket options as httpcore takes them: (level, option, value) or (level, option, None, length).
SocketOption = (
    tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]
)

# Reading pauses while this much is buffered and unread, and resumes below the low mark: a
# slow reader holds at most a few of httpcore's 64 KB reads in memory.
HIGH_WATER = 256 * 1024
LOW_WATER = 64 * 1024


class _Protocol(asyncio.Protocol):
    """Buffers what the transport delivers and wakes the one waiting read."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.chunks: deque[bytes] = deque()
        self.buffered = 0
        self.eof = False
        self.error: BaseException | None = None
        self.reading_paused = False
        self.waiter: asyncio.Future[None] | None = None
        self.drain_waiter: asyncio.Future[None] | None = None
        self.writing_paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.chunks.append(data)
        self.buffered += len(data)
        if self.buffered > HIGH_WATER and not self.reading_paused and self.transport is not None:
            self.reading_paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool | None:
        self.eof = True
        self._wake()
        return None  # close the transport: an HTTP client never writes after the server's EOF

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        if exc is not None:
            self.error = exc
        self._wake()
        waiter, self.drain_waiter = self.drain_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        waiter, self.drain_waiter = self.drain_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def take(self, max_bytes: int) -> bytes:
        """Up to max_bytes of what is buffered (the first chunk itself when it fits: no copy)."""
        chunks = self.chunks
        if len(chunks) == 1 and self.buffered <= max_bytes:
            data = chunks.popleft()
        else:
            parts, size = [], 0
            while chunks and size < max_bytes:
                chunk = chunks.popleft()
                if size + len(chunk) > max_bytes:
                    keep = max_bytes - size
                    chunks.appendleft(chunk[keep:])
                    chunk = chunk[:keep]
                parts.append(chunk)
                size += len(chunk)
            data = b"".join(parts)
        self.buffered -= len(data)
        if self.reading_paused and self.buffered <= LOW_WATER and self.transport is not None:
            self.reading_paused = False
            self.transport.resume_reading()
        return data


class AsyncioStream(httpcore2.AsyncNetworkStream):
    """One connection (plain or TLS) as httpcore's network stream."""

    def __init__(self, transport: asyncio.Transport, protocol: _Protocol) -> None:
        self._transport = transport
        self._protocol = protocol
        protocol.transport = transport
        # The one read deadline and the timer that checks it (re-armed only when it fires
        # before the deadline it finds: a read that waits does not arm a timer of its own).
        self._deadline = 0.0
        self._timer: asyncio.TimerHandle | None = None

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        protocol = self._protocol
        if not protocol.buffered and not protocol.eof:
            await self._wait_for_data(timeout)
        if protocol.buffered:
            return protocol.take(max_bytes)
        if protocol.error is not None:
            raise httpcore2.ReadError(str(protocol.error) or type(protocol.error).__name__)
        return b""

    async def _wait_for_data(self, timeout: float | None) -> None:
        protocol = self._protocol
        if protocol.waiter is not None:
            raise RuntimeError("AsyncioStream.read: another read is already waiting")
        loop = protocol.loop
        waiter: asyncio.Future[None] = loop.create_future()
        protocol.waiter = waiter
        if timeout is None:
            self._deadline = math.inf
        else:
            self._deadline = loop.time() + timeout
            timer = self._timer
            if timer is None or timer.when() > self._deadline:
                if timer is not None:
                    timer.cancel()
                self._timer = loop.call_at(self._deadline, self._check_deadline)
        try:
            await waiter
        except TimeoutError:
            raise httpcore2.ReadTimeout(
                f"no data from the server within {_seconds(timeout)}"
            ) from None
        finally:
            protocol.waiter = None

    def _check_deadline(self) -> None:
        self._timer = None
        waiter = self._protocol.waiter
        if waiter is None or waiter.done():
            return  # no read is waiting: the next one arms the timer again
        loop = self._protocol.loop
        if self._deadline == math.inf:
            return  # this read waits without a limit
        if loop.time() >= self._deadline - 0.001:
            waiter.set_exception(TimeoutError())
        else:
            self._timer = loop.call_at(self._deadline, self._check_deadline)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        protocol = self._protocol
        if protocol.error is not None or self._transport.is_closing():
            raise httpcore2.WriteError("the connection is closed")
        self._transport.write(buffer)
        if not protocol.writing_paused:
            return
        # The kernel's buffer is full: wait (rarely) until the transport drained.
        waiter: asyncio.Future[None] = protocol.loop.create_future()
        protocol.drain_waiter = waiter
        try:
            async with asyncio.timeout(timeout):
                await waiter
        except TimeoutError:
            raise httpcore2.WriteTimeout(f"could not send within {_seconds(timeout)}") from None
        if protocol.error is not None:
            raise httpcore2.WriteError(str(protocol.error) or type(protocol.error).__name__)

    async def aclose(self) -> None:
        self.close_now()

    def close_now(self) -> None:
        """Close the connection (at once: nothing waits for it)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._transport.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        loop = self._protocol.loop
        try:
            async with asyncio.timeout(timeout):
                transport = await loop.start_tls(
                    self._transport,
                    self._protocol,
                    ssl_context,
                    server_hostname=server_hostname,
                )
        except TimeoutError:
            await self.aclose()
            raise httpcore2.ConnectTimeout(
                f"the TLS handshake did not finish within {_seconds(timeout)}"
            ) from None
        except (ssl.SSLError, OSError) as exc:
            await self.aclose()
            raise httpcore2.ConnectError(str(exc) or type(exc).__name__) from exc
        if transport is None:  # the connection closed during the handshake
            raise httpcore2.ConnectError("the connection closed during the TLS handshake")
        assert isinstance(transport, asyncio.Transport)
        return AsyncioStream(transport, self._protocol)

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":
            return self._transport.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._transport.get_extra_info("sockname")
        if info == "server_addr":
            return self._transport.get_extra_info("peername")
        if info == "socket":
            return self._transport.get_extra_info("socket")
        if info == "is_readable":
            # The transport reads all the time, so "readable" (pool: an idle connection the
            # server closed or wrote to) is what the protocol has, not what the socket has.
            protocol = self._protocol
            return bool(protocol.buffered) or protocol.eof or self._transport.is_closing()
        return None


class AsyncioBackend(httpcore2.AsyncNetworkBackend):
    """httpcore's network backend on asyncio transports (see the module's docstring)."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        return await _connected(
            loop.create_connection(
                lambda: _Protocol(loop),
                host,
                port,
                local_addr=(local_address, 0) if local_address else None,
                # As anyio connects: both address families raced, 250 ms apart.
                happy_eyeballs_delay=0.25,
            ),
            timeout,
            socket_options,
        )

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        return await _connected(
            loop.create_unix_connection(lambda: _Protocol(loop), path), timeout, socket_options
        )

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


async def _connected(
    connecting: Coroutine[Any, Any, tuple[asyncio.BaseTransport, _Protocol]],
    timeout: float | None,
    options: Iterable[SocketOption] | None,
) -> httpcore2.AsyncNetworkStream:
    """The stream of a connection being made, with asyncio's errors as httpcore's."""
    try:
        async with asyncio.timeout(timeout):
            transport, protocol = await connecting
    except TimeoutError as exc:
        raise httpcore2.ConnectTimeout(f"no connection within {_seconds(timeout)}") from exc
    except OSError as exc:
        raise httpcore2.ConnectError(str(exc) or type(exc).__name__) from exc
    assert isinstance(transport, asyncio.Transport)
    _apply(transport, options)
    return AsyncioStream(transport, protocol)


def _seconds(timeout: float | None) -> str:
    return "the time allowed" if timeout is None else f"{timeout:g} s"


def _apply(transport: asyncio.Transport, options: Iterable[SocketOption] | None) -> None:
    sock = transport.get_extra_info("socket")
    for option in options or ():
        sock.setsockopt(*option)


def keepalive_options() -> list[SocketOption]:
    """The socket options the SDK's own client sets (TCP keep-alive, probing after 60 s)."""
    options: list[SocketOption] = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, True)]
    for name, value in (("TCP_KEEPINTVL", 60), ("TCP_KEEPCNT", 5), ("TCP_KEEPIDLE", 60)):
        option = getattr(socket, name, None)
        if option is not None:
            options.append((socket.IPPROTO_TCP, option, value))
    return options


class AsyncioTransport(httpx2.AsyncHTTPTransport):
    """httpx's transport (its request and error mapping) over a pool on `AsyncioBackend`."""

    def __init__(
        self,
        *,
        verify: ssl.SSLContext | bool = True,
        limits: httpx2.Limits = anthropic.DEFAULT_CONNECTION_LIMITS,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> None:
        ssl_context = httpx2.create_ssl_context(verify=verify)
        super().__init__(verify=ssl_context, limits=limits, socket_options=socket_options)
        # httpx builds its pool with httpcore's default backend and offers no setting for
        # another: the same pool, as httpx configures it, on ours.
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            socket_options=socket_options,
            network_backend=AsyncioBackend(),
        )


__all__ = ["AsyncioBackend", "AsyncioStream", "AsyncioTransport", "keepalive_options"]
