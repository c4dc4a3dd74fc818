"""Stored messages and the pure function that turns them into the Messages API `messages` list.

The request the model sees is rebuilt from stored rows every time, so "what the model saw" can be
reproduced from the database for any request.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

STATUS_TEMPLATE = '<command-message>The "{name}" skill is loading</command-message>'
HIDDEN_PREFIX = "Base directory for this skill: "
INTERRUPTED_RESULT = "Interrupted: the run was stopped before this tool call finished."


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """One stored row, as the core sees it."""

    role: str
    content: tuple[dict[str, Any], ...]
    kind: str = "text"
    is_meta: bool = False
    to_model: bool = True
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def text(cls, role: str, text: str, **kwargs: Any) -> StoredMessage:
        return cls(role=role, content=({"type": "text", "text": text},), **kwargs)

    @property
    def plain_text(self) -> str:
        return "\n".join(b.get("text", "") for b in self.content if b.get("type") == "text")


def status_message_text(name: str, args: str) -> str:
    """The visible status message for an invoked skill (rendered as a chip, never as raw tags)."""
    lines = [STATUS_TEMPLATE.format(name=name), f"<command-name>{name}</command-name>"]
    if args:
        lines.append(f"<command-args>{args}</command-args>")
    return "\n".join(lines)


def parse_status_message(text: str) -> dict[str, str] | None:
    """Read name and args back from a status message; None if the text is not one."""
    if not text.startswith("<command-message>"):
        return None
    name = _between(text, "<command-name>", "</command-name>")
    if name is None:
        return None
    return {"name": name, "args": _between(text, "<command-args>", "</command-args>") or ""}


def _between(text: str, start: str, end: str) -> str | None:
    i = text.find(start)
    if i < 0:
        return None
    j = text.find(end, i + len(start))
    if j < 0:
        return None
    return text[i + len(start) : j]


def _clean_block(block: dict[str, Any]) -> dict[str, Any] | None:
    """Drop blocks the API would reject when replayed (empty text)."""
    if block.get("type") == "text" and not block.get("text"):
        return None
    return block


def to_api_messages(rows: Iterable[StoredMessage]) -> list[dict[str, Any]]:
    """`to_model` rows in order, consecutive same-role rows merged, tool_result blocks first."""
    turns: list[dict[str, Any]] = []
    for row in rows:
        if not row.to_model:
            continue
        blocks = [b for b in (_clean_block(dict(b)) for b in row.content) if b is not None]
        if not blocks:
            continue
        if turns and turns[-1]["role"] == row.role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": row.role, "content": blocks})
    for turn in turns:
        if turn["role"] == "user":
            results = [b for b in turn["content"] if b.get("type") == "tool_result"]
            others = [b for b in turn["content"] if b.get("type") != "tool_result"]
            turn["content"] = results + others
    _answer_orphans(turns)
    # The API rejects a conversation that starts with the assistant.
    while turns and turns[0]["role"] != "user":
        turns.pop(0)
    if turns and turns[-1]["role"] == "assistant":
        _strip_trailing_whitespace(turns[-1])
    return turns


def _answer_orphans(turns: list[dict[str, Any]]) -> None:
    """Guarantee every tool_use has a tool_result in the next user turn (defence in depth)."""
    for i, turn in enumerate(turns):
        if turn["role"] != "assistant":
            continue
        ids = [b["id"] for b in turn["content"] if b.get("type") == "tool_use"]
        if not ids:
            continue
        if i + 1 < len(turns):
            nxt = turns[i + 1]
        else:
            continue  # the last assistant turn: the loop is about to answer it
        answered = {b.get("tool_use_id") for b in nxt["content"] if b.get("type") == "tool_result"}
        missing = [
            {
                "type": "tool_result",
                "tool_use_id": tid,
                "content": INTERRUPTED_RESULT,
                "is_error": True,
            }
            for tid in ids
            if tid not in answered
        ]
        if missing:
            results = [b for b in nxt["content"] if b.get("type") == "tool_result"]
            others = [b for b in nxt["content"] if b.get("type") != "tool_result"]
            nxt["content"] = results + missing + others


def _strip_trailing_whitespace(turn: dict[str, Any]) -> None:
    content = turn["content"]
    if content and content[-1].get("type") == "text":
        stripped = content[-1]["text"].rstrip()
        if stripped:
            content[-1] = {**content[-1], "text": stripped}
        else:
            content.pop()
    if not content:
        content.append({"type": "text", "text": "(no content)"})


def unanswered_tool_uses(rows: Sequence[StoredMessage]) -> list[dict[str, Any]]:
    """tool_use blocks of the last assistant message that no later row answers."""
    last_assistant = None
    for i in range(len(rows) - 1, -1, -1):
        if rows[i].role == "assistant" and rows[i].to_model:
            last_assistant = i
            break
    if last_assistant is None:
        return []
    uses = [b for b in rows[last_assistant].content if b.get("type") == "tool_use"]
    answered = {
        b.get("tool_use_id")
        for row in rows[last_assistant + 1 :]
        for b in row.content
        if b.get("type") == "tool_result"
    }
    return [b for b in uses if b["id"] not in answered]


def close_open_tool_uses(
    rows: Sequence[StoredMessage], *, answered: Iterable[str] = ()
) -> list[dict[str, Any]]:
    """An "interrupted" tool_result for every open tool_use of the last assistant message.

    Open means no later row answers it and its id is not in `answered` (results not stored yet).
    A stopped run, a cancelled tool turn and the recovery of a dead run all close their history
    with this, so the next request is valid for the API.
    """
    done = set(answered)
    return [
        tool_result_block(b["id"], INTERRUPTED_RESULT, is_error=True)
        for b in unanswered_tool_uses(rows)
        if b["id"] not in done
    ]


def tool_result_block(tool_use_id: str, content: str, *, is_error: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": content}
    if is_error:
        block["is_error"] = True
    return block


def request_size(messages: Sequence[dict[str, Any]]) -> int:
    return len(json.dumps(messages, ensure_ascii=False))
