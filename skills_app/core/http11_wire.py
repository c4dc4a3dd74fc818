"""The wire format of HTTP/1.1 for `core.http11`: request heads and bodies written, response heads
and framing read, strictly (see `core.http11` for what is refused and why), with httpcore's
exceptions (raised by the network streams and here) mapped to httpx's."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

import httpcore2
import httpx2

from .asyncio_http import AsyncioStream

MAX_HEAD_BYTES = 64 * 1024
MAX_CHUNK_LINE = 4096
READ_SIZE = 64 * 1024

_STATUS_LINE = re.compile(rb"HTTP/1\.([01]) ([0-9]{3})(?: ([^\r\n]*))?")
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")

Origin = tuple[bytes, bytes, int]

# httpcore's exceptions (raised by the network streams) as httpx's.
_MAPPED: tuple[tuple[type[Exception], type[httpx2.TransportError]], ...] = (
    (httpcore2.ConnectTimeout, httpx2.ConnectTimeout),
    (httpcore2.ReadTimeout, httpx2.ReadTimeout),
    (httpcore2.WriteTimeout, httpx2.WriteTimeout),
    (httpcore2.PoolTimeout, httpx2.PoolTimeout),
    (httpcore2.ConnectError, httpx2.ConnectError),
    (httpcore2.ReadError, httpx2.ReadError),
    (httpcore2.WriteError, httpx2.WriteError),
    (httpcore2.RemoteProtocolError, httpx2.RemoteProtocolError),
)


@contextlib.contextmanager
def as_httpx(request: httpx2.Request) -> Iterator[None]:
    try:
        yield
    except httpx2.TransportError:
        raise
    except Exception as exc:
        for theirs, ours in _MAPPED:
            if isinstance(exc, theirs):
                raise ours(str(exc), request=request) from exc
        raise


def broken(message: str) -> httpcore2.RemoteProtocolError:
    return httpcore2.RemoteProtocolError(message)


class Connection:
    """One open connection and what is left of its last read."""

    __slots__ = ("stream", "buffer", "idle_since")

    def __init__(self, stream: AsyncioStream) -> None:
        self.stream = stream
        self.buffer = b""
        self.idle_since = 0.0

    async def read(self, timeout: float | None) -> bytes:
        data = await self.stream.read(READ_SIZE, timeout)
        if not data:
            raise broken("the server closed the connection before the response ended")
        return data

    def reusable(self) -> bool:
        # The stream reads all the time: an idle connection the server closed (or wrote to)
        # says so here.
        return not self.buffer and not self.stream.get_extra_info("is_readable")


def chunk_size(line: bytes) -> int:
    size = line.split(b";", 1)[0].strip(b" \t")
    if not _HEX.fullmatch(size):
        raise broken(f"a chunk size is not hexadecimal: {line[:40]!r}")
    return int(size, 16)


def request_head(request: httpx2.Request) -> bytes:
    target = request.url.raw_path
    # httpx takes any string as a method: one with a space or line break would split the request.
    method = request.method.encode("utf-8")
    if not _TOKEN.fullmatch(method):
        raise httpx2.LocalProtocolError(f"invalid request method {method[:40]!r}", request=request)
    lines = [method + b" " + target + b" HTTP/1.1"]
    for name, value in request.headers.raw:
        if not _TOKEN.fullmatch(name) or b"\r" in value or b"\n" in value:
            raise httpx2.LocalProtocolError(
                f"invalid request header {name[:40]!r}", request=request
            )
        lines.append(name + b": " + value)
    return b"\r\n".join(lines) + b"\r\n\r\n"


async def send_body(stream: AsyncioStream, request: httpx2.Request, timeout: float | None) -> None:
    """The request's body as its head frames it: more or fewer bytes than its Content-Length
    (or a body with neither header) would leave the server reading the rest as a next request
    or waiting, so they are refused, the excess before it is sent."""
    chunked = request.headers.get("transfer-encoding", "").lower() == "chunked"
    declared = request.headers.get("content-length", "0")
    if not chunked and not (declared.isascii() and declared.isdigit() and len(declared) <= 20):
        raise httpx2.LocalProtocolError(
            f"invalid Content-Length {declared[:40]!r}", request=request
        )
    left = 0 if chunked else int(declared)
    body = request.stream
    assert isinstance(body, httpx2.AsyncByteStream)
    async for part in body:
        if not part:
            continue
        if not chunked:
            if len(part) > left:
                raise httpx2.LocalProtocolError(
                    "the request body is longer than its Content-Length", request=request
                )
            left -= len(part)
        await stream.write(b"%x\r\n%s\r\n" % (len(part), part) if chunked else part, timeout)
    if chunked:
        await stream.write(b"0\r\n\r\n", timeout)
    elif left:
        raise httpx2.LocalProtocolError(
            "the request body is shorter than its Content-Length", request=request
        )


async def read_head(
    connection: Connection, timeout: float | None
) -> tuple[int, bytes, list[tuple[bytes, bytes]], bool]:
    """The final response's status, reason, headers and whether it allows keep-alive
    (informational 1xx responses before it are skipped)."""
    while True:
        buffer = connection.buffer
        while (end := buffer.find(b"\r\n\r\n")) < 0:
            if len(buffer) > MAX_HEAD_BYTES:
                raise broken("the response head is larger than 64 KB")
            buffer += await connection.read(timeout)
        head, connection.buffer = buffer[:end], buffer[end + 4 :]
        if len(head) > MAX_HEAD_BYTES:
            raise broken("the response head is larger than 64 KB")
        status_line, *lines = head.split(b"\r\n")
        match = _STATUS_LINE.fullmatch(status_line)
        if match is None:
            raise broken(f"not an HTTP/1.x status line: {status_line[:60]!r}")
        minor, status = match.group(1), int(match.group(2))
        headers = [header(line) for line in lines]
        if 100 <= status < 200 and status != 101:
            continue
        tokens = b",".join(value for name, value in headers if name.lower() == b"connection")
        names = {name.lower() for name, _ in headers}
        # Both Transfer-Encoding and Content-Length: read as chunked (RFC 9112 6.3), but a
        # framing two parties may read differently is not trusted with another request.
        keep_alive = (
            minor == b"1"
            and b"close" not in tokens.lower()
            and not {b"transfer-encoding", b"content-length"} <= names
        )
        return status, match.group(3) or b"", headers, keep_alive


def header(line: bytes) -> tuple[bytes, bytes]:
    name, colon, value = line.partition(b":")
    if not colon or not _TOKEN.fullmatch(name):
        raise broken(f"a malformed response header: {line[:60]!r}")
    if b"\r" in value or b"\n" in value:
        raise broken("a response header value holds a line break")
    return name, value.strip(b" \t")


def framing(
    request: httpx2.Request, headers: list[tuple[bytes, bytes]], status: int
) -> tuple[str, int]:
    """How the body ends: ("length", n), ("chunked", 0) or ("close", 0)."""
    if request.method == "HEAD" or status in (204, 304):
        return "length", 0
    codings = [v for n, v in headers if n.lower() == b"transfer-encoding"]
    if codings:
        # Only chunked, once: a coding before it (gzip, ...) would go up undecoded, and
        # chunked twice would need decoding twice.
        coding = b",".join(codings)
        if coding.strip(b" \t").lower() != b"chunked":
            raise broken(f"an unsupported transfer coding: {coding[:40]!r}")
        return "chunked", 0
    lengths = {v.strip() for n, v in headers if n.lower() == b"content-length"}
    for value in list(lengths):
        lengths.discard(value)
        lengths.update(part.strip() for part in value.split(b","))
    # 20 digits as h11 allows: more than int() even converts is a broken head, not a ValueError.
    if len(lengths) > 1 or any(not v.isdigit() or len(v) > 20 for v in lengths):
        raise broken("a missing or conflicting Content-Length")
    if lengths:
        return "length", int(lengths.pop())
    return "close", 0
