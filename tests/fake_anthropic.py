"""A fake Anthropic Messages API on loopback, so tests exercise the real SDK, streaming and errors.

It behaves like the API where Skillscope depends on it: request rules and model settings
(`fake_anthropic_rules`), unknown model ids (404), thinking (a thinking block with a signature
before the answer when thinking is on, and a 400 when a continued tool loop drops or alters it),
prompt caching (`fake_anthropic_cache`: usage split into uncached, written and read tokens), and
refusals (`Reply.refusal()`, or REFUSE_DIRECTIVE in the user's text).
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from skills_app.core.model_catalog import DEFAULT_MODEL
from tests.fake_anthropic_cache import PromptCache, render_blocks
from tests.fake_anthropic_rules import (
    ThinkingLedger,
    model_info,
    not_found_message,
    thinking_display,
    thinking_on,
    validate_cache_control,
    validate_request,
    validate_settings,
)

# The model id tests use unless they test model choice (a real id: the server refuses others).
TEST_MODEL = DEFAULT_MODEL
# In the last user message's text, makes the server refuse (stop_reason "refusal", no content)
# without using up a scripted reply.
REFUSE_DIRECTIVE = "[[refuse]]"

# The longest a paused reply waits for its event, so a forgotten release cannot hang the suite.
MAX_PAUSE_SECONDS = 30.0

_ids = itertools.count(1)


def _next_id(prefix: str) -> str:
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
        "id": id or _next_id("toolu"),
        "name": name,
        "input": input or {},
    }
    if raw_json is not None:
        block["raw_json"] = raw_json
    return block


class ReceivedRequest(dict):
    """A parsed JSON request body (a dict) that also remembers its path, headers and the answer status."""

    path: str
    headers: dict[str, str]
    status: int | None
    rejection: str | None
    usage: dict[str, Any] | None

    @property
    def system_text(self) -> str:
        """The system prompt's text, whether sent as a string or as text blocks."""
        system = self.get("system") or ""
        if isinstance(system, str):
            return system
        return "".join(b.get("text", "") for b in system if isinstance(b, dict))

    @property
    def api_key(self) -> str | None:
        """The key sent, as x-api-key or (newer SDKs) a bearer token."""
        auth = self.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            return auth[7:]
        return self.headers.get("x-api-key")


Responder = Callable[[ReceivedRequest], Reply]


def without_cache_control(value: Any) -> Any:
    """`value` (a request or part of one) with every cache_control marker removed."""
    if isinstance(value, dict):
        return {k: without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [without_cache_control(v) for v in value]
    return value


def _error_body(error_type: str, message: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": error_type, "message": message},
        "request_id": _next_id("req"),
    }


def _sse_events(
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
                    "id": _next_id("msg"),
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


def _message_json(reply: Reply, body: dict[str, Any], usage: dict[str, Any]) -> dict[str, Any]:
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
        "id": _next_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": reply.model or body.get("model", "claude-fake"),
        "content": content,
        "stop_reason": reply.stop_reason,
        "stop_sequence": reply.stop_sequence,
        **({"stop_details": reply.stop_details} if reply.stop_details else {}),
        "usage": {**usage, "output_tokens": 1 if reply.content else 0},
    }


def _last_user_text(body: dict[str, Any]) -> str:
    messages = body.get("messages") or []
    if not messages or messages[-1].get("role") != "user":
        return ""
    content = messages[-1].get("content")
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if b.get("type") == "text")


def _with_thinking(reply: Reply, body: dict[str, Any], display: str) -> Reply:
    """The reply as a thinking model gives it: a signed thinking block first."""
    if not reply.content:
        return reply  # a refusal or an empty answer
    if reply.content[0]["type"] in ("thinking", "redacted_thinking"):
        return reply
    if display == "summarized":
        topic = " ".join(_last_user_text(body).split())[:60] or "the tool results"
        text = f"Working out how to answer: {topic}."
    else:
        text = ""  # display "omitted": the block comes back with empty text, signature intact
    block = {"type": "thinking", "thinking": text, "signature": _next_id("sig")}
    return replace(reply, content=(block, *reply.content))


def _signed(reply: Reply) -> Reply:
    """Scripted thinking blocks without a signature get one (the API always signs them)."""
    if not any(b["type"] == "thinking" and "signature" not in b for b in reply.content):
        return reply
    content = tuple(
        {**b, "signature": _next_id("sig")}
        if b["type"] == "thinking" and "signature" not in b
        else b
        for b in reply.content
    )
    return replace(reply, content=content)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # keep test output quiet

    def handle(self) -> None:
        try:
            super().handle()
        except (ConnectionResetError, BrokenPipeError):
            pass  # the client dropped a kept-alive connection; normal for a stopped stream

    def do_POST(self) -> None:  # noqa: N802
        fake = self.server.fake
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        try:
            parsed: Any = json.loads(raw or b"null")
        except json.JSONDecodeError:
            parsed = None
        request = ReceivedRequest(parsed if isinstance(parsed, dict) else {})
        request.path = self.path.split("?")[0]
        request.headers = {k.lower(): v for k, v in self.headers.items()}
        request.status = None
        request.rejection = None
        request.usage = None
        fake._record(request)

        if request.path != "/v1/messages":
            self._reject(request, 404, "not_found_error", f"Not found: {request.path}")
            return
        if fake.api_key is not None and request.api_key != fake.api_key:
            self._reject(request, 401, "authentication_error", "invalid x-api-key")
            return
        reason = validate_request(parsed)
        if reason:
            self._reject(request, 400, "invalid_request_error", reason)
            return
        info = model_info(parsed)
        if info is None:
            self._reject(request, 404, "not_found_error", not_found_message(parsed))
            return
        thinks = thinking_on(parsed, info)
        reason = (
            validate_settings(parsed, info)
            or validate_cache_control(parsed)
            or fake.thinking.check_replay(parsed, thinking=thinks)
        )
        if reason:
            self._reject(request, 400, "invalid_request_error", reason)
            return
        if REFUSE_DIRECTIVE in _last_user_text(parsed):
            reply = Reply.refusal()
        else:
            reply = fake._next_reply(request)
        if reply.status != 200:
            self._reject(
                request,
                reply.status,
                reply.error_type or "api_error",
                reply.error_message or "error",
                dict(reply.headers),
            )
            return
        reply = _signed(reply)
        if thinks:
            reply = _with_thinking(reply, parsed, thinking_display(parsed, info))
        fake.thinking.issue(list(reply.content))
        if reply.stop_reason == "refusal" and not reply.content:
            # Declined before any output: not billed, nothing cached.
            usage: dict[str, Any] = {
                "input_tokens": 0,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            }
        else:
            blocks = render_blocks(parsed, thinking=thinks)
            minimum = info.cache_min_tokens if fake.cache_minimum else 0
            usage = fake.cache.account(blocks, minimum=minimum).as_usage()
        request.status = 200
        request.usage = usage
        if parsed.get("stream"):
            self._stream(reply, parsed, usage)
        else:
            self._send_json(200, _message_json(reply, parsed, usage), dict(reply.headers))

    def _reject(
        self,
        request: ReceivedRequest,
        status: int,
        error_type: str,
        message: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        request.status = status
        request.rejection = message
        self._send_json(status, _error_body(error_type, message), headers or {})

    def _send_json(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", _next_id("req"))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, reply: Reply, body: dict[str, Any], usage: dict[str, Any]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("request-id", _next_id("req"))
        for key, value in reply.headers:
            self.send_header(key, value)
        self.end_headers()
        try:
            for sent, (name, data) in enumerate(_sse_events(reply, body, usage)):
                if reply.cut_after_events is not None and sent >= reply.cut_after_events:
                    self._cut()
                    return
                if reply.error_event_after is not None and sent == reply.error_event_after:
                    error = _error_body("overloaded_error", "Overloaded")
                    self._chunk(f"event: error\ndata: {json.dumps(error)}\n\n".encode())
                    self._chunk(b"")
                    return
                if reply.wait_for is not None and sent == reply.wait_after_events:
                    self._pause(reply)
                if reply.delay and sent > 0:
                    time.sleep(reply.delay)
                self._chunk(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            self._chunk(b"")
        except (BrokenPipeError, ConnectionResetError, OSError):
            # The client went away (a stopped run); nothing more to send.
            self.close_connection = True

    def _pause(self, reply: Reply) -> None:
        assert reply.wait_for is not None
        if reply.reached is not None:
            reply.reached.set()
        deadline = time.monotonic() + MAX_PAUSE_SECONDS
        while not reply.wait_for.wait(0.02):
            if self.server.fake._closing.is_set() or time.monotonic() > deadline:
                break

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _cut(self) -> None:
        # Close without the terminating chunk, as a dropped connection looks to the client.
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    fake: FakeAnthropic


class FakeAnthropic:
    """A fake Anthropic Messages API on 127.0.0.1 in a background thread."""

    def __init__(self, *, api_key: str | None = None, cache_minimum: bool = True) -> None:
        self.api_key = api_key
        # Apply each model's minimum cacheable prefix (off: every breakpoint is written).
        self.cache_minimum = cache_minimum
        self.cache = PromptCache()
        self.thinking = ThinkingLedger()
        self._lock = threading.Lock()
        self._queue: list[Reply] = []
        self._responder: Responder | None = None
        self._requests: list[ReceivedRequest] = []
        self._closing = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def base_url(self) -> str:
        """The URL to give the SDK (ANTHROPIC_BASE_URL)."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def requests(self) -> list[ReceivedRequest]:
        """Every request received, in order, rejected ones included (a snapshot)."""
        with self._lock:
            return list(self._requests)

    def enqueue(self, *replies: Reply) -> None:
        """Answer the next requests with these replies, in order."""
        with self._lock:
            self._queue.extend(replies)

    def set_responder(self, responder: Responder | None) -> None:
        """Answer with responder(request) whenever the queue is empty."""
        with self._lock:
            self._responder = responder

    def close(self) -> None:
        """Stop the server and release any paused reply."""
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeAnthropic:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _record(self, request: ReceivedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _next_reply(self, request: ReceivedRequest) -> Reply:
        with self._lock:
            if self._queue:
                return self._queue.pop(0)
            responder = self._responder
        if responder is not None:
            return responder(request)
        # x-should-retry: false so the SDK reports this at once instead of retrying it.
        return Reply.error(
            500,
            "api_error",
            "The fake Anthropic server has no reply queued for this request.",
            headers={"x-should-retry": "false"},
        )


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    """A started fake Anthropic server, closed after the test."""
    server = FakeAnthropic()
    try:
        yield server
    finally:
        server.close()


__all__ = [
    "REFUSE_DIRECTIVE",
    "TEST_MODEL",
    "FakeAnthropic",
    "ReceivedRequest",
    "Reply",
    "fake_anthropic",
    "tool_use_block",
    "validate_request",
    "without_cache_control",
]
