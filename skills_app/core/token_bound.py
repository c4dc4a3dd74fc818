"""The most prompt tokens a request can be billed for: what a budget sets aside before a call.

A token of text stands for at least one byte of it, so the UTF-8 bytes of the request's JSON
(system, tools, messages, their keys and quotes included) bound its text tokens from above in
every script: an emoji is 4 bytes and up to 4 tokens, where characters / 4 said a quarter of one.
The API adds a system prompt of its own when tools are offered (a few hundred tokens), which is
not in the body: `TOOL_PROMPT_TOKENS` is added for it.

Images and PDFs are billed by pixels and pages, not by the bytes of their base64 data: counting
those bytes would set aside many times what a photo costs and keep it out of small budgets. Their
data counts as base64 characters / 4, the estimate used before, which is above the bill of an
ordinary photo or document but not a bound (a large, plain picture can cost more).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

from .llm import ModelRequest

# Above the API's tool-use system prompt (346 tokens for current models with tool_choice auto).
TOOL_PROMPT_TOKENS = 500
MEDIA_TYPES = frozenset({"image", "document"})
MEDIA_CHARS_PER_TOKEN = 4


def _json_bytes(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def _media_data(value: Any) -> Iterator[str]:
    """The base64 data of every image and document block in `value`, tool results included."""
    if isinstance(value, list):
        for item in value:
            yield from _media_data(item)
    elif isinstance(value, dict):
        source = value.get("source")
        if value.get("type") in MEDIA_TYPES and isinstance(source, dict):
            data = source.get("data")
            if source.get("type") == "base64" and isinstance(data, str):
                yield data
            return
        yield from _media_data(value.get("content"))


def input_token_bound(request: ModelRequest) -> int:
    """The most prompt tokens `request` can count (see the module docstring for the method)."""
    total = _json_bytes(request.system) + _json_bytes(request.tools)
    total += _json_bytes(request.messages)
    for data in _media_data(request.messages):
        # Base64 is ASCII: its bytes are its characters, counted again below at 4 per token.
        total -= len(data) - math.ceil(len(data) / MEDIA_CHARS_PER_TOKEN)
    if request.tools:
        total += TOOL_PROMPT_TOKENS
    return total


__all__ = ["MEDIA_CHARS_PER_TOKEN", "TOOL_PROMPT_TOKENS", "input_token_bound"]
