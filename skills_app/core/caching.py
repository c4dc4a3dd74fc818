"""Prompt-cache breakpoints: where a request carries `cache_control`, as one pure function.

The API caches prefixes: tools, then system, then messages, up to each block marked
`cache_control: {"type": "ephemeral"}` (at most 4 per request). A later request whose prefix matches
a cached one reads it at a tenth of the input price. The policy, in order of value:

1. the last tool definition: the tools (with the skill catalog) change only when skills or rules
   change, so they stay cached across conversations and turns;
2. the last system block: the system prompt is stable per profile (the system-prompt profile
   changes it when a skill loads, which costs that profile its cache; the others append instead);
3. the last cacheable block of the last message: caches the whole conversation so far, which the
   next request extends;
4. the last cacheable block of the message before the last assistant message, i.e. where the
   previous request ended and wrote its cache: the API looks back only 20 blocks for an earlier
   entry, so a model call that added more than 20 blocks (many parallel tool calls) would
   otherwise miss it.

Markers already in the input are dropped first, so a request never carries more than 4.
Nothing in the input is changed: marked dicts and lists are copies.
"""

from __future__ import annotations

from typing import Any

from .transcript import is_empty_text

MAX_BREAKPOINTS = 4
EPHEMERAL: dict[str, str] = {"type": "ephemeral"}
# Thinking blocks cannot carry cache_control; empty text blocks are rejected outright.
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})


def system_blocks(system: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The system prompt as a list of text blocks (a marker needs a block to sit on)."""
    if isinstance(system, str):
        return [{"type": "text", "text": system}] if system else []
    return list(system)


def with_cache_breakpoints(
    tools: list[dict[str, Any]],
    system: str | list[dict[str, Any]],
    messages: list[dict[str, Any]],
    *,
    limit: int = MAX_BREAKPOINTS,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Copies of tools, system (as blocks) and messages with at most `limit` breakpoints placed."""
    out_tools = [_unmarked(tool) for tool in tools]
    out_system = [_unmarked(block) for block in system_blocks(system)]
    out_messages = [_unmarked_message(message) for message in messages]

    placed = 0
    if placed < limit and out_tools:
        out_tools[-1] = _marked(out_tools[-1])
        placed += 1
    if placed < limit and out_system:
        out_system[-1] = _marked(out_system[-1])
        placed += 1
    targets = [len(out_messages) - 1, _previous_request_end(out_messages)]
    done: set[int] = set()
    for index in targets:
        if placed >= limit or index is None or index < 0 or index in done:
            continue
        if _mark_last_block(out_messages, index):
            done.add(index)
            placed += 1
    return out_tools, out_system, out_messages


def _previous_request_end(messages: list[dict[str, Any]]) -> int | None:
    """Index of the message just before the last assistant message (None if there is none)."""
    for i in range(len(messages) - 1, 0, -1):
        if messages[i].get("role") == "assistant":
            return i - 1
    return None


def _mark_last_block(messages: list[dict[str, Any]], index: int) -> bool:
    message = messages[index]
    content = message.get("content")
    if isinstance(content, str):
        if not content:
            return False
        messages[index] = {**message, "content": [_marked({"type": "text", "text": content})]}
        return True
    if not isinstance(content, list):
        return False
    for j in range(len(content) - 1, -1, -1):
        block = content[j]
        if _markable(block):
            blocks = list(content)
            blocks[j] = _marked(block)
            messages[index] = {**message, "content": blocks}
            return True
    return False


def _markable(block: Any) -> bool:
    if not isinstance(block, dict) or block.get("type") in _UNMARKABLE:
        return False
    return not is_empty_text(block)


def _marked(block: dict[str, Any]) -> dict[str, Any]:
    return {**block, "cache_control": dict(EPHEMERAL)}


def _unmarked(block: dict[str, Any]) -> dict[str, Any]:
    if "cache_control" not in block:
        return block
    return {k: v for k, v in block.items() if k != "cache_control"}


def _unmarked_message(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    if not isinstance(content, list) or not any(
        isinstance(b, dict) and "cache_control" in b for b in content
    ):
        return message
    return {
        **message,
        "content": [_unmarked(b) if isinstance(b, dict) else b for b in content],
    }
