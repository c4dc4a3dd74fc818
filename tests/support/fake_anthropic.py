"""A fake Anthropic Messages API on loopback, so tests exercise the real SDK, streaming and errors.

It behaves like the API where Skillscope depends on it: request rules and model settings
(`fake_anthropic_rules`), unknown model ids (404), thinking (a thinking block with a signature
before the answer when thinking is on, and a 400 when a continued tool loop drops or alters it),
prompt caching (`fake_anthropic_cache`: usage split into uncached, written and read tokens), and
refusals (`Reply.refusal()`, or REFUSE_DIRECTIVE in the user's text). A responder that chooses
skills from the request's catalog the way the demo model does is in `fake_anthropic_choice`.
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from skills_app.core.model_catalog import DEFAULT_MODEL
from tests.support.fake_anthropic_cache import (
    PromptCache,
    Tokenizer,
    chars_over_four,
    render_blocks,
)
from tests.support.fake_anthropic_replies import (
    Reply,
    last_user_text,
    message_json,
    next_id,
    signed,
    sse_events,
    tool_use_block,
    with_thinking,
)
from tests.support.fake_anthropic_rules import (
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

MAX_REQUEST_BYTES = 32 * 1024 * 1024

# The longest a paused reply waits for its event, so a forgotten release cannot hang the suite.
MAX_PAUSE_SECONDS = 30.0


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
        "request_id": next_id("req"),
    }


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
        except ssl.SSLError:
            pass  # over HTTPS, a client that refused the certificate (what some tests check)

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

        if length > MAX_REQUEST_BYTES:
            # The API's own limit for a Messages request (what a few large PDFs reach).
            self._reject(request, 413, "request_too_large", "Request exceeds the maximum size")
            return
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
        if REFUSE_DIRECTIVE in last_user_text(parsed):
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
        reply = signed(reply)
        if thinks:
            reply = with_thinking(reply, parsed, thinking_display(parsed, info))
        fake.thinking.issue(list(reply.content))
        if reply.stop_reason == "refusal" and not reply.content:
            # Declined before any output: not billed, nothing cached.
            usage: dict[str, Any] = {
                "input_tokens": 0,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            }
        else:
            blocks = render_blocks(parsed, thinking=thinks, tokenizer=fake.tokenizer)
            minimum = info.cache_min_tokens if fake.cache_minimum else 0
            usage = fake.cache.account(blocks, minimum=minimum).as_usage()
        request.status = 200
        request.usage = usage
        if parsed.get("stream"):
            self._stream(reply, parsed, usage)
        else:
            self._send_json(200, message_json(reply, parsed, usage), dict(reply.headers))

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
        self.send_header("request-id", next_id("req"))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, reply: Reply, body: dict[str, Any], usage: dict[str, Any]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("request-id", next_id("req"))
        for key, value in reply.headers:
            self.send_header(key, value)
        self.end_headers()
        try:
            for sent, (name, data) in enumerate(sse_events(reply, body, usage)):
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
    tls: ssl.SSLContext | None = None

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = super().get_request()
        if self.tls is not None:
            # The handshake happens in the request's own thread, on its first read.
            sock = self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, address


class FakeAnthropic:
    """A fake Anthropic Messages API on 127.0.0.1 in a background thread."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        cache_minimum: bool = True,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.api_key = api_key
        # Apply each model's minimum cacheable prefix (off: every breakpoint is written).
        self.cache_minimum = cache_minimum
        self.cache = PromptCache()
        # How the usage it reports counts a prompt's tokens (see fake_anthropic_cache).
        self.tokenizer: Tokenizer = chars_over_four
        self.thinking = ThinkingLedger()
        self._lock = threading.Lock()
        self._queue: list[Reply] = []
        self._responder: Responder | None = None
        self._requests: list[ReceivedRequest] = []
        self._closing = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        # HTTPS with this server-side context (a certificate the test made), else plain HTTP.
        self._server.tls = tls
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def base_url(self) -> str:
        """The URL to give the SDK (ANTHROPIC_BASE_URL)."""
        host, port = self._server.server_address[:2]
        scheme = "http" if self._server.tls is None else "https"
        return f"{scheme}://{host}:{port}"

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
