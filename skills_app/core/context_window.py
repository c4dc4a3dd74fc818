"""Will the next request fit the model's context window? An estimate to warn before sending.

Two estimates, the better one when it can be had:
- from the previous call's usage: the API's own count of the prompt it saw, plus characters / 4
  for what was appended since (the answer and the new user turn). Exact for the known part;
  valid while the system prompt and tools are unchanged (`prefix_chars` equal).
- characters / 4 of the JSON of system, tools and messages otherwise. Newer tokenizers count more
  tokens per character (Opus 4.7+ and Sonnet 5: up to ~1.35x), so warnings start at 85 %.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .llm import ModelRequest
from .model_catalog import get_model
from .pricing import input_total
from .stop_reasons import CONTEXT_NEAR_TEXT, CONTEXT_OVER_TEXT

CHARS_PER_TOKEN = 4
WARN_RATIO = 0.85


@dataclass(frozen=True, slots=True)
class PreviousCall:
    """What is known from the last model call of this conversation."""

    usage: Mapping[str, Any]  # its usage, as the API reported it
    message_count: int  # len(request.messages) of that call
    prefix_chars: int  # prefix_chars(request) of that call


@dataclass(frozen=True, slots=True)
class ContextEstimate:
    """Estimated prompt tokens of a request against the model's window."""

    tokens: int
    window: int | None  # None: a model Skillscope has no figures for
    level: str  # "ok" | "near" | "over"
    message: str  # empty when level is "ok"


class ContextFull(Exception):
    """The next request would not fit the model's context window; it was not sent."""

    def __init__(self, estimate: ContextEstimate) -> None:
        super().__init__(estimate.message)
        self.estimate = estimate


def _chars(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def prefix_chars(request: ModelRequest) -> int:
    """Characters of the system prompt and tools (what precedes the messages)."""
    return _chars(request.system) + _chars(request.tools)


def estimate_input_tokens(request: ModelRequest, previous: PreviousCall | None = None) -> int:
    """Estimated prompt tokens of `request` (see the module docstring for the method)."""
    messages = request.messages
    if (
        previous is not None
        and previous.prefix_chars == prefix_chars(request)
        and 0 < previous.message_count <= len(messages)
    ):
        known = input_total(previous.usage)
        if known:
            added = messages[previous.message_count :]
            return known + math.ceil(_chars(added) / CHARS_PER_TOKEN) if added else known
    total = prefix_chars(request) + _chars(messages)
    return math.ceil(total / CHARS_PER_TOKEN)


def check_context(
    request: ModelRequest, previous: PreviousCall | None = None, *, warn_ratio: float = WARN_RATIO
) -> ContextEstimate:
    """Estimate `request` against its model's window: "over" should not be sent, "near" warns."""
    tokens = estimate_input_tokens(request, previous)
    info = get_model(request.model)
    if info is None:
        return ContextEstimate(tokens=tokens, window=None, level="ok", message="")
    window = info.context_window
    figures = {"tokens": f"{tokens:,}", "window": f"{window:,}", "label": info.label}
    if tokens > window:
        return ContextEstimate(tokens, window, "over", CONTEXT_OVER_TEXT.format(**figures))
    if tokens >= window * warn_ratio:
        percent = round(tokens * 100 / window)
        message = CONTEXT_NEAR_TEXT.format(percent=percent, **figures)
        return ContextEstimate(tokens, window, "near", message)
    return ContextEstimate(tokens, window, "ok", "")
