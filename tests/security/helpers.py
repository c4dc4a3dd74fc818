"""Shared pieces of the security tests: an independent leak check, personas, websocket tabs."""

from __future__ import annotations

import asyncio
import html
import json
from collections.abc import Callable, Iterable
from typing import Any

from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from skills_app.core.redact import MIN_SPAN
from tests.support.frames import parse

ORIGIN = (b"origin", b"http://127.0.0.1")
HOST = (b"host", b"127.0.0.1")


def hidden_windows(texts: Iterable[str], size: int = MIN_SPAN) -> set[str]:
    """Every `size`-character piece of every line of the hidden texts (whitespace collapsed).

    Deliberately not the code under test: a plain sliding window over each line.
    """
    windows: set[str] = set()
    for text in texts:
        for line in text.splitlines():
            line = " ".join(line.split())
            windows.update(line[i : i + size] for i in range(len(line) - size + 1))
    return windows


def leaked(output: str | bytes, texts: Iterable[str]) -> list[str]:
    """The hidden pieces (at least MIN_SPAN characters) found in an output, HTML unescaped."""
    if isinstance(output, bytes):
        output = output.decode("utf-8", "replace")
    shown = " ".join(html.unescape(output).split())
    return sorted(w for w in hidden_windows(texts) if w in shown)


def frames_text(frames: list[dict[str, Any]]) -> str:
    """Every string a browser received in these frames, one per line (JSON escapes undone)."""
    parts: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            parts.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(frames)
    return "\n".join(parts)


def frame_bytes(frame: dict[str, Any]) -> int:
    """The size of a frame as the consumer sent it (`receive` notes it; else as JSON)."""
    if "bytes" in frame:
        return int(frame["bytes"])
    return len(json.dumps(frame).encode())


async def receive(tab: WebsocketCommunicator, timeout: float) -> dict[str, Any]:
    """One frame as `tests.support.frames.parse` reads it, with its size on the wire as `bytes`."""
    raw = await tab.receive_from(timeout=timeout)
    frame = parse(raw)
    frame["bytes"] = len(raw.encode() if isinstance(raw, str) else raw)
    return frame


def client_of(user: Any) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def _cookie(user: Any) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


async def open_tab(
    user: Any, conversation_id: int, headers: list[tuple[bytes, bytes]] | None = None
) -> tuple[WebsocketCommunicator, bool]:
    """A websocket tab on a conversation as `user` (same-origin headers unless given)."""
    from webapp.asgi import application

    cookie = await sync_to_async(_cookie)(user)
    communicator = WebsocketCommunicator(
        application,
        f"/ws/conversations/{conversation_id}/",
        headers=[
            *(headers if headers is not None else [ORIGIN, HOST]),
            (b"cookie", f"sessionid={cookie}".encode()),
        ],
    )
    connected, _code = await communicator.connect(timeout=10)
    return communicator, connected


async def frames_until(
    tab: WebsocketCommunicator, predicate: Callable[[dict[str, Any]], bool], timeout: float = 20.0
) -> list[dict[str, Any]]:
    """Frames up to and including the first that satisfies `predicate` (bounded wait)."""
    frames: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        frames.append(await receive(tab, timeout=max(0.1, deadline - loop.time())))
        if predicate(frames[-1]):
            return frames


async def resume(tab: WebsocketCommunicator, after: int = 0) -> list[dict[str, Any]]:
    await tab.send_json_to({"action": "resume", "after": after})
    return await frames_until(tab, lambda f: f.get("type") == "resumed")
