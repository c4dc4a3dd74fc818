"""Reading the chat websocket like a browser does, for the consumer tests.

Frames are JSON, read with `tests.support.frames.parse`: a stored event's {type, seq, data, html};
streamed text as sent.
`Reader` assembles the streamed text the way chat.js does (offset 0 sets a block, any other offset appends) and
fails the test if a piece would leave a hole or repeat text.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from tests.support.frames import parse

Frame = dict[str, Any]
TEXT_TYPES = ("text.delta", "thinking.delta")


async def receive(tab: Any, timeout: float = 5.0) -> Frame:
    return parse(await tab.receive_from(timeout=timeout))


async def until(
    tab: Any, predicate: Callable[[Frame], bool], *, timeout: float = 15.0
) -> list[Frame]:
    """Frames until one satisfies `predicate` (inclusive); fails after `timeout` seconds."""
    frames: list[Frame] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        frames.append(await receive(tab, timeout=max(0.1, deadline - loop.time())))
        if predicate(frames[-1]):
            return frames


def of_type(frame_type: str) -> Callable[[Frame], bool]:
    return lambda frame: frame.get("type") == frame_type


def stored(frames: list[Frame]) -> list[Frame]:
    """The frames of stored events (they carry a seq)."""
    return [f for f in frames if "seq" in f]


class Reader:
    """The streamed text of one tab, block by block, assembled like chat.js does."""

    def __init__(self) -> None:
        self.blocks: dict[tuple[int, int, int, str], str] = {}

    def apply(self, frames: list[Frame]) -> Reader:
        for frame in frames:
            if frame.get("type") not in TEXT_TYPES:
                continue
            key = (frame["run"], frame["call"], frame["index"], frame["type"])
            have = self.blocks.get(key, "")
            if frame["offset"] == 0:
                have = ""
            assert frame["offset"] == len(have), (
                f"a piece at offset {frame['offset']} after {len(have)} characters of {key}"
            )
            self.blocks[key] = have + frame["text"]
        return self

    def text(self, kind: str = "text.delta") -> str:
        """All blocks of that kind, in order, joined."""
        return "".join(t for key, t in sorted(self.blocks.items()) if key[3] == kind)
