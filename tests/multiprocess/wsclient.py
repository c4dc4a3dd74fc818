"""A minimal websocket client (RFC 6455) on asyncio streams: enough to talk to the chat consumer.

The project has no websocket client library, and the multi-process test must reach real daphne
processes over TCP; this speaks text frames, pings and close, nothing more.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import struct
from typing import Any

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class ConnectionClosed(Exception):
    """The server closed the websocket (or the TCP connection)."""


class WebSocket:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def connect(
        cls, host: str, port: int, path: str, *, headers: dict[str, str], timeout: float = 10
    ) -> WebSocket:
        """Open the TCP connection and complete the upgrade handshake."""
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        # A Host among `headers` (the public name, as a proxy passes it) replaces the address.
        headers = {"Host": f"{host}:{port}", **headers}
        lines = [
            f"GET {path} HTTP/1.1",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Key: {key}",
            "Sec-WebSocket-Version: 13",
            *(f"{name}: {value}" for name, value in headers.items()),
        ]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        await writer.drain()
        head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)).decode("latin-1")
        status = head.split("\r\n", 1)[0]
        if " 101 " not in f"{status} ":
            writer.close()
            raise ConnectionClosed(f"the upgrade was refused: {status}")
        expected = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        if f"sec-websocket-accept: {expected.lower()}" not in head.lower():
            writer.close()
            raise ConnectionClosed("the server answered the upgrade with a wrong accept key")
        return cls(reader, writer)

    async def send_json(self, payload: dict[str, Any]) -> None:
        await self._send(0x1, json.dumps(payload).encode())

    async def receive_json(self, timeout: float) -> dict[str, Any]:
        """The next text frame as JSON; TimeoutError when none arrives in time."""
        return json.loads(await asyncio.wait_for(self._receive_text(), timeout))

    async def receive_frame(self, timeout: float) -> dict[str, Any]:
        """The next chat frame, read as `tests.support.frames.parse` reads it."""
        from tests.support.frames import parse

        return parse(await asyncio.wait_for(self._receive_text(), timeout))

    async def close(self) -> None:
        try:
            await self._send(0x8, struct.pack("!H", 1000))
        except (ConnectionError, RuntimeError):
            pass
        self.writer.close()
        try:
            await asyncio.wait_for(self.writer.wait_closed(), 2)
        except (TimeoutError, ConnectionError):
            pass

    async def _send(self, opcode: int, payload: bytes) -> None:
        # Client frames are always masked.
        mask = os.urandom(4)
        size = len(payload)
        if size < 126:
            header = struct.pack("!BB", 0x80 | opcode, 0x80 | size)
        elif size < 1 << 16:
            header = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, size)
        else:
            header = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, size)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.writer.write(header + mask + masked)
        await self.writer.drain()

    async def _receive_text(self) -> str:
        parts: list[bytes] = []
        while True:
            fin, opcode, payload = await self._read_frame()
            if opcode == 0x8:
                raise ConnectionClosed(f"closed by the server: {payload[:2].hex()}")
            if opcode == 0x9:
                await self._send(0xA, payload)
                continue
            if opcode in (0x1, 0x0):
                parts.append(payload)
                if fin:
                    return b"".join(parts).decode()
            # pongs and binary frames are not used by the chat consumer: skip them

    async def _read_frame(self) -> tuple[bool, int, bytes]:
        try:
            first, second = await self.reader.readexactly(2)
            size = second & 0x7F
            if size == 126:
                (size,) = struct.unpack("!H", await self.reader.readexactly(2))
            elif size == 127:
                (size,) = struct.unpack("!Q", await self.reader.readexactly(8))
            mask = await self.reader.readexactly(4) if second & 0x80 else b""
            payload = await self.reader.readexactly(size)
        except asyncio.IncompleteReadError as exc:
            raise ConnectionClosed("the connection ended") from exc
        if mask:
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        return bool(first & 0x80), first & 0x0F, payload
