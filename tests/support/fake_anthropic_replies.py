"""Scripted replies of the fake Anthropic server, and how it streams them as the API's SSE events."""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass, replace
from typing import Any

_ids = itertools.count(1)


def next_id(prefix: str) -> str:
    return f"{prefix}_fake{next(_ids):06d}"


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted answer of the fake server: content blocks to stream, or an HTTP error, plus faults."""

    content: tuple[dict[str, Any], ...] = ()
    stop_reason: str | None = "end_turn"
    stop_sequence: str | None = None
    status: int = 200
    error_type: str | None = None
    error_message: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    chunk: int = 8  # characters per text_delta
    json_chunks: int = 3  # how many input_json_delta pieces a tool input is split into
    delay: float = 0.0  # seconds slept before each SSE event after message_start
    cut_after_events: int | None = None  # close the connection after sending this many events
    no_message_stop: bool = False  # end the body cleanly but without the message_stop event
    error_event_after: int | None = None  # send an SSE `error` event after this many events
    wait_for: threading.Event | None = None  # pause until this is set ...
    wait_after_events: int = 0  # ... after sending this many events
    reached: threading.Event | None = None  # set by the server when it starts waiting
    model: str | None = None
    output_tokens: int | None = None
    stop_details: dict[str, Any] | None = None

    @staticmethod
    def text(text: str, *, chunk: int = 8, delay: float = 0.0, **options: Any) -> Reply:
        """A reply with one text block streamed in `chunk`-character deltas."""
        return Reply(content=({"type": "text", "text": text},), chunk=chunk, delay=delay, **options)

    @staticmethod
    def tool_use(
        name: str,
        input: dict[str, Any] | None = None,
        *,
        text: str | None = None,
        id: str | None = None,
        raw_json: str | None = None,
        **options: Any,
    ) -> Reply:
        """A reply calling one tool (optionally after some text); `raw_json` streams that input verbatim."""
        blocks: list[dict[str, Any]] = []
        if text is not None:
            blocks.append({"type": "text", "text": text})
        blocks.append(tool_use_block(name, input, id=id, raw_json=raw_json))
        options.setdefault("stop_reason", "tool_use")
        return Reply(content=tuple(blocks), **options)

    @staticmethod
    def blocks(blocks: list[dict[str, Any]], **options: Any) -> Reply:
        """A reply with any content blocks: text, tool_use (see `tool_use_block`), thinking."""
        if "stop_reason" not in options and any(b["type"] == "tool_use" for b in blocks):
            options["stop_reason"] = "tool_use"
        return Reply(content=tuple(blocks), **options)

    @staticmethod
    def refusal(*, category: str | None = None, **options: Any) -> Reply:
        """A declined request: HTTP 200, `stop_reason: "refusal"`, no content, nothing billed."""
        details = {"type": "refusal", "category": category, "explanation": None}
        return Reply(content=(), stop_reason="refusal", stop_details=details, **options)

    @staticmethod
    def empty(*, stop_reason: str = "end_turn", **options: Any) -> Reply:
        """A reply with no content blocks at all."""
        return Reply(content=(), stop_reason=stop_reason, **options)

    @staticmethod
    def error(
        status: int,
        type: str,
        message: str,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        """An HTTP error with the API's JSON error body; retries are made instant by default."""
        if headers is None:
            # retry-after: 0 alone makes the SDK fall back to its 0.5 s+ backoff; retry-after-ms keeps tests fast.
            headers = {"retry-after": "0", "retry-after-ms": "1"}
        return Reply(
            status=status,
            error_type=type,
            error_message=message,
            headers=tuple(headers.items()),
            stop_reason=None,
        )

    def with_(self, **changes: Any) -> Reply:
        """A copy with some fields changed (faults, delays, stop reason)."""
        return replace(self, **changes)


def tool_use_block(
    name: str,
    input: dict[str, Any] | None = None,
    *,
    id: str | None = None,
    raw_json: str | None = None,
) -> dict[str, Any]:
    """A tool_use block spec for `Reply.blocks`; `raw_json` is streamed verbatim (may be invalid)."""
    block: dict[str, Any] = {
        "type": "tool_use",
        "id": id or next_id("toolu"),
        "name": name,
        "input": input or {},
    }
    if raw_json is not None:
        block["raw_json"] = raw_json
    return block


def sse_events(
    reply: Reply, body: dict[str, Any], usage: dict[str, Any]
) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events the real API would send for this reply, in order."""
    output_chars = 0
    events: list[tuple[str, dict[str, Any]]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": next_id("msg"),
                    "type": "message",
                    "role": "assistant",
                    "model": reply.model or body.get("model", "claude-fake"),
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {**usage, "output_tokens": 1 if reply.content else 0},
                },
            },
        ),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(reply.content):
        kind = block["type"]
        if kind == "text":
            start = {"type": "text", "text": ""}
            deltas = [
                {"type": "text_delta", "text": piece}
                for piece in _split(block["text"], reply.chunk)
            ]
            output_chars += len(block["text"])
        elif kind == "tool_use":
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            raw = block.get("raw_json")
            if raw is None:
                raw = json.dumps(block["input"])
            size = max(1, -(-len(raw) // max(1, reply.json_chunks)))
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in _split(raw, size)]
            output_chars += len(raw)
        elif kind == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": p}
                for p in _split(block["thinking"], reply.chunk)
                if p
            ]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
            output_chars += len(block["thinking"])
        elif kind == "redacted_thinking":
            start = {"type": "redacted_thinking", "data": block["data"]}
            deltas = []
        else:
            raise ValueError(
                f"The fake server cannot stream a {kind!r} block; use text/tool_use/thinking."
            )
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
        )
        for delta in deltas:
            events.append(
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    if reply.output_tokens is not None:
        output_tokens = reply.output_tokens
    else:
        output_tokens = output_chars // 4 + 1 if reply.content else 0
    delta: dict[str, Any] = {"stop_reason": reply.stop_reason, "stop_sequence": reply.stop_sequence}
    if reply.stop_details is not None:
        delta["stop_details"] = reply.stop_details
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": delta,
                # Cumulative, as the API sends them: the prompt figures again, the final output.
                "usage": {**usage, "output_tokens": output_tokens},
            },
        )
    )
    if not reply.no_message_stop:
        events.append(("message_stop", {"type": "message_stop"}))
    return events


def _split(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def message_json(reply: Reply, body: dict[str, Any], usage: dict[str, Any]) -> dict[str, Any]:
    """The non-streaming Message object for this reply."""
    content = []
    for block in reply.content:
        if block["type"] == "tool_use":
            content.append({k: block[k] for k in ("type", "id", "name", "input")})
        elif block["type"] == "redacted_thinking":
            content.append({"type": "redacted_thinking", "data": block["data"]})
        else:
            content.append(dict(block))
    return {
        "id": next_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": reply.model or body.get("model", "claude-fake"),
        "content": content,
        "stop_reason": reply.stop_reason,
        "stop_sequence": reply.stop_sequence,
        **({"stop_details": reply.stop_details} if reply.stop_details else {}),
        "usage": {**usage, "output_tokens": 1 if reply.content else 0},
    }


def last_user_text(body: dict[str, Any]) -> str:
    messages = body.get("messages") or []
    if not messages or messages[-1].get("role") != "user":
        return ""
    content = messages[-1].get("content")
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if b.get("type") == "text")


def with_thinking(reply: Reply, body: dict[str, Any], display: str) -> Reply:
    """The reply as a thinking model gives it: a signed thinking block first."""
    if not reply.content:
        return reply  # a refusal or an empty answer
    if reply.content[0]["type"] in ("thinking", "redacted_thinking"):
        return reply
    if display == "summarized":
        topic = " ".join(last_user_text(body).split())[:60] or "the tool results"
        text = f"Working out how to answer: {topic}."
    else:
        text = ""  # display "omitted": the block comes back with empty text, signature intact
    block = {"type": "thinking", "thinking": text, "signature": next_id("sig")}
    return replace(reply, content=(block, *reply.content))


def signed(reply: Reply) -> Reply:
    """Scripted thinking blocks without a signature get one (the API always signs them)."""
    if not any(b["type"] == "thinking" and "signature" not in b for b in reply.content):
        return reply
    content = tuple(
        {**b, "signature": next_id("sig")}
        if b["type"] == "thinking" and "signature" not in b
        else b
        for b in reply.content
    )
    return replace(reply, content=content)
