"""The fake server's prompt cache: usage figures computed from the prefixes it has seen, like the API.

The API caches the prompt (tools, then system, then messages) up to each block marked
`cache_control`. A request reads the longest cached prefix it finds at each of its breakpoints or
at most 20 blocks before it, and writes its breakpoints beyond that; prefixes below the
model's minimum are never written. Entries live 5 minutes from their last use. Caches are per
model, and turning thinking on or off invalidates the messages (not the tools or system).

Tokens are characters / 4 of each block's canonical JSON (without its cache_control), so
`input_tokens + cache_creation_input_tokens + cache_read_input_tokens` is the prompt's size. A test
of a text the real tokenizer splits finer (emoji, other scripts) passes `worst_case_tokens`.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

LOOKBACK_BLOCKS = 20
DEFAULT_TTL = 300.0


@dataclass(frozen=True, slots=True)
class PromptBlock:
    """One block of the rendered prompt, in render order."""

    key: str  # cumulative hash of the prefix ending with this block
    tokens: int  # cumulative tokens of that prefix
    breakpoint: bool


def chars_over_four(text: str) -> int:
    """The fake's usual token count: characters / 4, rounded up."""
    return math.ceil(len(text) / 4)


def worst_case_tokens(text: str) -> int:
    """A tokenizer at its worst outside ASCII: characters / 4 for ASCII, then one token per UTF-8
    byte of every other character (an emoji is 4). The real one counted about 3.25 per emoji."""
    ascii_chars = sum(1 for ch in text if ch.isascii())
    other = len(text.encode()) - ascii_chars
    return math.ceil(ascii_chars / 4) + other


Tokenizer = Callable[[str], int]


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _without_marker(block: Any) -> Any:
    if isinstance(block, dict) and "cache_control" in block:
        return {k: v for k, v in block.items() if k != "cache_control"}
    return block


def render_blocks(
    body: dict[str, Any], *, thinking: bool, tokenizer: Tokenizer = chars_over_four
) -> list[PromptBlock]:
    """The request's prompt as cumulative blocks: tools, system, then message content."""
    digest = hashlib.sha256(f"model:{body.get('model')}".encode())
    tokens = 0
    out: list[PromptBlock] = []

    def add(part: str, block: Any) -> None:
        nonlocal tokens
        text = _canonical(_without_marker(block))
        digest.update(f"\0{part}\0{text}".encode())
        tokens += tokenizer(text)
        marked = isinstance(block, dict) and "cache_control" in block
        out.append(PromptBlock(key=digest.hexdigest(), tokens=tokens, breakpoint=marked))

    for tool in body.get("tools") or []:
        add("tool", tool)
    system = body.get("system")
    if isinstance(system, str):
        if system:
            add("system", {"type": "text", "text": system})
    elif isinstance(system, list):
        for block in system:
            add("system", block)
    # Toggling thinking changes the messages' cache, not the tools' or the system's.
    digest.update(f"\0thinking:{thinking}".encode())
    for i, message in enumerate(body.get("messages") or []):
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks or []:
            add(f"{i}:{message.get('role')}", block)
    return out


@dataclass(frozen=True, slots=True)
class CacheUsage:
    input_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int

    def as_usage(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": self.cache_creation_input_tokens,
                "ephemeral_1h_input_tokens": 0,
            },
        }


class PromptCache:
    """Cached prefixes (key -> expiry time), shared by every request to one fake server."""

    def __init__(
        self, *, ttl: float = DEFAULT_TTL, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl = ttl
        self._clock = clock
        self._entries: dict[str, float] = {}
        self._lock = threading.Lock()

    def account(self, blocks: list[PromptBlock], *, minimum: int = 0) -> CacheUsage:
        """Read what is cached, write the request's breakpoints, and return the usage split."""
        total = blocks[-1].tokens if blocks else 0
        now = self._clock()
        with self._lock:
            self._entries = {k: t for k, t in self._entries.items() if t > now}
            hit = -1
            for p, block in enumerate(blocks):
                if not block.breakpoint:
                    continue
                # The breakpoint's own position, then up to 20 blocks before it.
                for q in range(p, max(-1, p - LOOKBACK_BLOCKS - 1), -1):
                    if blocks[q].key in self._entries:
                        hit = max(hit, q)
                        break
            read = blocks[hit].tokens if hit >= 0 else 0
            if hit >= 0:
                self._entries[blocks[hit].key] = now + self.ttl  # a read refreshes the entry
            written_to = read
            for p, block in enumerate(blocks):
                if block.breakpoint and p > hit and block.tokens >= minimum:
                    self._entries[block.key] = now + self.ttl
                    written_to = max(written_to, block.tokens)
        return CacheUsage(
            input_tokens=max(0, total - written_to),
            cache_creation_input_tokens=written_to - read,
            cache_read_input_tokens=read,
        )

    def clear(self) -> None:
        """Forget every cached prefix (as if 5 minutes had passed)."""
        with self._lock:
            self._entries.clear()
