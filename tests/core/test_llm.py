"""AnthropicModel against the fake Anthropic server: events, SDK retries and every failure kind."""

from __future__ import annotations

import asyncio
import gc
import logging
import socket
import threading
import warnings
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import anthropic
import httpx2
import pytest

from skills_app.core.demo import DemoModel
from skills_app.core.events import (
    BlockDone,
    BlockStarted,
    MessageDone,
    ModelEvent,
    TextDelta,
    ThinkingDelta,
)
from skills_app.core.llm import AnthropicModel, ModelError, ModelRequest
from skills_app.runs.client import default_client
from tests.support.fake_anthropic import TEST_MODEL, FakeAnthropic, Reply, tool_use_block

CACHED = {"cache_control": {"type": "ephemeral"}}
BASH_TOOL = {
    "name": "Bash",
    "description": "Run a shell command.",
    "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
}


def request(**changes: Any) -> ModelRequest:
    fields: dict[str, Any] = {
        "model": TEST_MODEL,
        "system": "You are helpful.",
        "tools": [BASH_TOOL],
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 256,
    }
    fields.update(changes)
    return ModelRequest(**fields)


def model(fake: FakeAnthropic, **options: Any) -> AnthropicModel:
    options.setdefault("max_retries", 2)
    return AnthropicModel(api_key="test-key", base_url=fake.base_url, model=TEST_MODEL, **options)


async def collect(client: AnthropicModel, req: ModelRequest | None = None) -> list[ModelEvent]:
    return [event async for event in client.stream(req or request())]


async def failure(
    client: AnthropicModel, req: ModelRequest | None = None
) -> tuple[ModelError, list[ModelEvent]]:
    events: list[ModelEvent] = []
    with pytest.raises(ModelError) as caught:
        async for event in client.stream(req or request()):
            events.append(event)
    return caught.value, events


def test_as_kwargs_omits_an_empty_system_prompt_and_tool_list() -> None:
    kwargs = request(system="", tools=[]).as_kwargs()
    assert kwargs == {
        "model": TEST_MODEL,
        "max_tokens": 256,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi", **CACHED}]}],
    }
    assert request().as_kwargs()["system"] == [
        {"type": "text", "text": "You are helpful.", **CACHED}
    ]
    assert request().as_kwargs()["tools"] == [{**BASH_TOOL, **CACHED}]


async def test_it_streams_plain_text_as_our_events(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(Reply.text("Hello there, friend", chunk=6))
    events = await collect(model(fake_anthropic))
    assert events[0] == BlockStarted(index=0, block_type="text")
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert [d.text for d in deltas] == ["Hello ", "there,", " frien", "d"]
    assert all(d.index == 0 for d in deltas)
    assert events[-2] == BlockDone(index=0, block={"type": "text", "text": "Hello there, friend"})
    done = events[-1]
    assert isinstance(done, MessageDone)
    message = done.message
    assert message["role"] == "assistant"
    assert message["model"] == TEST_MODEL
    assert message["id"].startswith("msg_")
    assert message["content"] == [{"type": "text", "text": "Hello there, friend"}]
    assert message["stop_reason"] == "end_turn"
    assert message["stop_sequence"] is None
    assert message["usage"]["input_tokens"] > 0
    assert message["usage"]["output_tokens"] > 0


async def test_it_sends_the_request_streaming_with_cache_breakpoints(
    fake_anthropic: FakeAnthropic,
) -> None:
    fake_anthropic.enqueue(Reply.text("ok"))
    await collect(model(fake_anthropic))
    sent = fake_anthropic.requests[0]
    assert sent["stream"] is True
    assert sent["system"] == [{"type": "text", "text": "You are helpful.", **CACHED}]
    assert sent["tools"] == [{**BASH_TOOL, **CACHED}]
    assert sent["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi", **CACHED}]}
    ]
    assert sent.api_key == "test-key"
    # What was sent is exactly what as_kwargs() says, plus the SDK's stream flag.
    assert {k: v for k, v in sent.items() if k != "stream"} == request().as_kwargs()


async def test_it_streams_a_tool_use_with_parsed_input(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(
        Reply.tool_use("Bash", {"command": "ls -la"}, text="Looking.", id="toolu_9")
    )
    events = await collect(model(fake_anthropic))
    assert (
        BlockStarted(index=1, block_type="tool_use", tool_name="Bash", tool_use_id="toolu_9")
        in events
    )
    tool_block = {
        "type": "tool_use",
        "id": "toolu_9",
        "name": "Bash",
        "input": {"command": "ls -la"},
    }
    assert BlockDone(index=1, block=tool_block) in events
    done = events[-1]
    assert isinstance(done, MessageDone)
    assert done.message["content"] == [{"type": "text", "text": "Looking."}, tool_block]
    assert done.message["stop_reason"] == "tool_use"


async def test_it_keeps_a_thinking_block_with_its_signature(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(
        Reply.blocks(
            [
                {"type": "thinking", "thinking": "plan", "signature": "sig"},
                {"type": "text", "text": "ok"},
            ]
        )
    )
    events = await collect(model(fake_anthropic))
    done = events[-1]
    assert isinstance(done, MessageDone)
    assert done.message["content"][0] == {
        "type": "thinking",
        "thinking": "plan",
        "signature": "sig",
    }


@pytest.mark.parametrize("stop_reason", ["max_tokens", "refusal", "pause_turn"])
async def test_it_passes_stop_reasons_through(
    fake_anthropic: FakeAnthropic, stop_reason: str
) -> None:
    fake_anthropic.enqueue(Reply.text("cut short", stop_reason=stop_reason))
    events = await collect(model(fake_anthropic))
    done = events[-1]
    assert isinstance(done, MessageDone)
    assert done.message["stop_reason"] == stop_reason
    assert done.message["content"] == [{"type": "text", "text": "cut short"}]


async def test_it_handles_a_reply_with_no_content(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(Reply.empty())
    events = await collect(model(fake_anthropic))
    assert len(events) == 1
    assert isinstance(events[0], MessageDone)
    assert events[0].message["content"] == []


async def test_the_sdk_retries_a_429_then_the_reply_streams(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(
        Reply.error(429, "rate_limit_error", "Too many requests"), Reply.text("finally")
    )
    events = await collect(model(fake_anthropic))
    assert len(fake_anthropic.requests) == 2
    assert fake_anthropic.requests[1].headers["x-stainless-retry-count"] == "1"
    assert isinstance(events[-1], MessageDone)
    assert events[-1].message["content"] == [{"type": "text", "text": "finally"}]


@pytest.mark.parametrize(
    ("status", "error_type", "kind", "wording"),
    [
        (
            529,
            "overloaded_error",
            "overloaded",
            "The model is overloaded (HTTP 529). Try again in a minute.",
        ),
        (500, "api_error", "server", "internal error (HTTP 500)"),
        (429, "rate_limit_error", "rate_limited", "rate-limiting requests (HTTP 429)"),
    ],
)
async def test_retryable_errors_become_model_errors_once_retries_are_exhausted(
    fake_anthropic: FakeAnthropic, status: int, error_type: str, kind: str, wording: str
) -> None:
    fake_anthropic.enqueue(*[Reply.error(status, error_type, "busy")] * 3)
    error, events = await failure(model(fake_anthropic))
    assert len(fake_anthropic.requests) == 3  # the first try and max_retries=2
    assert events == []
    assert error.kind == kind
    assert error.retryable is True
    assert error.status_code == status
    assert wording in error.message
    assert error.partial_content == []


@pytest.mark.parametrize(
    ("status", "error_type", "kind", "wording"),
    [
        (400, "invalid_request_error", "bad_request", "rejected the request (HTTP 400): bad field"),
        (401, "authentication_error", "auth", "Check ANTHROPIC_API_KEY"),
        (403, "permission_error", "auth", "HTTP 403"),
        (404, "not_found_error", "not_found", f'for the model "{TEST_MODEL}"'),
    ],
)
async def test_request_errors_are_not_retried(
    fake_anthropic: FakeAnthropic, status: int, error_type: str, kind: str, wording: str
) -> None:
    fake_anthropic.enqueue(Reply.error(status, error_type, "bad field"))
    error, _ = await failure(model(fake_anthropic))
    assert len(fake_anthropic.requests) == 1
    assert error.kind == kind
    assert error.retryable is False
    assert error.status_code == status
    assert wording in error.message


async def test_a_request_the_api_would_reject_is_a_bad_request(
    fake_anthropic: FakeAnthropic,
) -> None:
    error, _ = await failure(
        model(fake_anthropic), request(messages=[{"role": "assistant", "content": "x"}])
    )
    assert error.kind == "bad_request"
    assert 'first message must use the "user" role' in error.message


async def test_a_closed_port_is_a_connection_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = AnthropicModel(
        api_key="k", base_url=f"http://127.0.0.1:{port}", model="m", max_retries=0
    )
    error, _ = await failure(client)
    assert error.kind == "connection"
    assert error.retryable is True
    assert f"http://127.0.0.1:{port}" in error.message
    assert error.status_code is None


async def test_a_stalled_stream_is_a_timeout(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(Reply.text("slow words here", chunk=5, delay=1.0))
    error, _ = await failure(model(fake_anthropic, timeout=0.3, max_retries=0))
    assert error.kind == "timeout"
    assert error.retryable is True
    assert "0.3 s" in error.message


async def test_a_stream_cut_mid_text_keeps_the_partial_text(fake_anthropic: FakeAnthropic) -> None:
    # message_start, ping, block start, then two 4-character deltas before the cut
    fake_anthropic.enqueue(Reply.text("Hello world, cut here", chunk=4, cut_after_events=5))
    error, events = await failure(model(fake_anthropic))
    assert error.kind == "stream_cut"
    assert error.retryable is True
    assert error.partial_content == [{"type": "text", "text": "Hello wo"}]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hell", "o wo"]
    assert len(fake_anthropic.requests) == 1  # the SDK does not retry once the stream started


async def test_a_cut_inside_tool_json_drops_the_half_tool_use(
    fake_anthropic: FakeAnthropic,
) -> None:
    reply = Reply.tool_use("Bash", {"command": "rm -rf build"}, text="Cleaning.", chunk=20)
    # message_start, ping, text start/delta/stop, tool start, one json delta, then the cut
    fake_anthropic.enqueue(reply.with_(cut_after_events=7))
    error, events = await failure(model(fake_anthropic))
    assert error.kind == "stream_cut"
    assert error.partial_content == [{"type": "text", "text": "Cleaning."}]
    assert any(isinstance(e, BlockStarted) and e.block_type == "tool_use" for e in events)
    assert not any(isinstance(e, BlockDone) and e.block["type"] == "tool_use" for e in events)


async def test_a_stream_without_message_stop_is_a_cut(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(Reply.text("All of it", no_message_stop=True))
    error, events = await failure(model(fake_anthropic))
    assert error.kind == "stream_cut"
    assert error.partial_content == [{"type": "text", "text": "All of it"}]
    assert not any(isinstance(e, MessageDone) for e in events)


async def test_invalid_tool_json_is_reported_and_the_tool_use_dropped(
    fake_anthropic: FakeAnthropic,
) -> None:
    fake_anthropic.enqueue(Reply.tool_use("Bash", text="Running.", raw_json='{"command": ls}'))
    error, _ = await failure(model(fake_anthropic))
    assert error.kind == "invalid_tool_json"
    assert error.partial_content == [{"type": "text", "text": "Running."}]
    assert "not valid JSON" in error.message


async def test_truncated_tool_json_is_not_passed_off_as_empty_input(
    fake_anthropic: FakeAnthropic,
) -> None:
    # The SDK's lenient parser would turn this into {}; a tool must never run with that.
    fake_anthropic.enqueue(Reply.tool_use("Bash", raw_json='{"command": "ls'))
    error, events = await failure(model(fake_anthropic))
    assert error.kind == "invalid_tool_json"
    assert error.partial_content == []
    assert not any(isinstance(e, BlockDone) for e in events)


async def test_an_error_event_mid_stream_keeps_the_partial_text(
    fake_anthropic: FakeAnthropic,
) -> None:
    fake_anthropic.enqueue(Reply.text("Some words", chunk=5, error_event_after=4))
    error, _ = await failure(model(fake_anthropic))
    assert error.kind == "overloaded"
    assert error.retryable is True
    assert error.status_code is None
    assert error.partial_content == [{"type": "text", "text": "Some "}]


async def test_several_tool_uses_each_get_their_own_block(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(
        Reply.blocks(
            [
                tool_use_block("Bash", {"command": "a"}, id="t1"),
                tool_use_block("Bash", {"command": "b"}, id="t2"),
            ]
        )
    )
    events = await collect(model(fake_anthropic))
    done = [e.block for e in events if isinstance(e, BlockDone)]
    assert [(b["id"], b["input"]) for b in done] == [
        ("t1", {"command": "a"}),
        ("t2", {"command": "b"}),
    ]


async def test_closing_the_stream_early_stops_cleanly(fake_anthropic: FakeAnthropic) -> None:
    release, reached = threading.Event(), threading.Event()
    fake_anthropic.enqueue(
        Reply.text("first second", chunk=6, wait_for=release, wait_after_events=4, reached=reached)
    )
    stream = model(fake_anthropic).stream(request())
    seen: list[ModelEvent] = []
    async for event in stream:
        seen.append(event)
        if isinstance(event, TextDelta):
            break
    await stream.aclose()  # what a stopped run does
    release.set()
    assert seen == [BlockStarted(index=0, block_type="text"), TextDelta(index=0, text="first ")]


def test_model_error_defaults_retryable_from_its_kind() -> None:
    assert ModelError("overloaded", "x").retryable is True
    assert ModelError("auth", "x").retryable is False
    assert ModelError("auth", "x", retryable=True).retryable is True
    assert str(ModelError("server", "Readable message.")) == "Readable message."


def test_one_model_can_serve_several_event_loops(fake_anthropic: FakeAnthropic) -> None:
    client = model(fake_anthropic)
    fake_anthropic.enqueue(Reply.text("one"), Reply.text("two"))
    first = asyncio.run(collect(client))
    second = asyncio.run(collect(client))
    assert isinstance(first[-1], MessageDone) and isinstance(second[-1], MessageDone)
    assert second[-1].message["content"] == [{"type": "text", "text": "two"}]


def _unclosed(caplog: pytest.LogCaptureFixture, run: Callable[[], object]) -> list[str]:
    """What aiohttp reports unclosed (an asyncio error, a ResourceWarning) once `run` is over
    and what it made is collected."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        with caplog.at_level(logging.ERROR, logger="asyncio"):
            run()
            gc.collect()
    reports = [r.getMessage() for r in caplog.records] + [str(w.message) for w in caught]
    return [report for report in reports if "Unclosed" in report]


def test_the_check_sees_an_sdk_client_left_open(fake_anthropic: FakeAnthropic, caplog) -> None:
    fake_anthropic.enqueue(Reply.text("left open"))

    async def call_and_leave_open() -> None:
        sdk = anthropic.AsyncAnthropic(
            api_key="k",
            base_url=fake_anthropic.base_url,
            http_client=anthropic.DefaultAioHttpClient(),
        )
        await sdk.messages.create(
            model=TEST_MODEL, max_tokens=16, messages=[{"role": "user", "content": "hi"}]
        )

    # aiohttp reports the session, its connector or both, as the collector finds them (a full run
    # once saw only "Unclosed connector"): either shows the check sees a client left open.
    reports = _unclosed(caplog, lambda: asyncio.run(call_and_leave_open()))
    assert any(
        "Unclosed client session" in report or "Unclosed connector" in report for report in reports
    ), reports


def test_each_loops_client_is_closed_on_it_before_the_loop_ends(
    fake_anthropic: FakeAnthropic, caplog
) -> None:
    fake_anthropic.enqueue(Reply.text("one"), Reply.text("two"))

    def two_loops() -> None:
        client = model(fake_anthropic)
        for _ in range(2):
            assert isinstance(asyncio.run(collect(client))[-1], MessageDone)

    assert _unclosed(caplog, two_loops) == []
    assert len(fake_anthropic.requests) == 2


# -- models, thinking, refusals, usage ---------------------------------------------------------


async def test_thinking_streams_as_thinking_deltas_and_keeps_the_signed_block(
    fake_anthropic: FakeAnthropic,
) -> None:
    fake_anthropic.enqueue(Reply.text("Answer."))
    events = await collect(model(fake_anthropic), request(thinking=True, effort="low"))
    sent = fake_anthropic.requests[0]
    assert sent["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert sent["output_config"] == {"effort": "low"}
    assert events[0] == BlockStarted(index=0, block_type="thinking")
    summary = "".join(e.text for e in events if isinstance(e, ThinkingDelta))
    assert summary.startswith("Working out how to answer: hi")
    assert all(e.index == 0 for e in events if isinstance(e, ThinkingDelta))
    assert [e.index for e in events if isinstance(e, TextDelta)] == [1]
    done = events[-1]
    assert isinstance(done, MessageDone)
    thinking, text = done.message["content"]
    assert thinking == {"type": "thinking", "thinking": summary, "signature": thinking["signature"]}
    assert thinking["signature"].startswith("sig_")
    assert text == {"type": "text", "text": "Answer."}


async def test_a_model_without_a_setting_never_receives_it(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(Reply.text("ok"), Reply.text("ok"))
    await collect(
        model(fake_anthropic),
        request(model="claude-opus-4-8", effort="max", temperature=0.2, max_tokens=500_000),
    )
    await collect(model(fake_anthropic), request(model="claude-haiku-4-5", effort="high"))
    opus, haiku = fake_anthropic.requests
    assert (opus.status, haiku.status) == (200, 200)
    assert "temperature" not in opus and opus["max_tokens"] == 128_000
    assert opus["output_config"] == {"effort": "max"}
    assert "output_config" not in haiku


async def test_sampling_goes_to_models_that_take_it(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(Reply.text("ok"))
    await collect(model(fake_anthropic), request(model="claude-haiku-4-5", temperature=0.3))
    assert fake_anthropic.requests[0]["temperature"] == 0.3
    assert fake_anthropic.requests[0].status == 200


async def test_a_404_names_the_model_and_the_configured_ones(
    fake_anthropic: FakeAnthropic,
) -> None:
    client = model(fake_anthropic, models=["claude-opus-4-8", "claude-sonnet-5"])
    error, _ = await failure(client, request(model="claude-sonnet-5-5"))
    assert error.kind == "not_found" and error.status_code == 404
    assert 'does not serve the model "claude-sonnet-5-5"' in error.message
    assert 'Did you mean "claude-sonnet-5"?' in error.message
    assert "Models configured here (ANTHROPIC_MODELS): claude-opus-4-8, claude-sonnet-5." in (
        error.message
    )


async def test_a_prompt_too_long_is_a_context_window_error(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(
        Reply.error(400, "invalid_request_error", "prompt is too long: 1000123 tokens > 1000000")
    )
    error, _ = await failure(model(fake_anthropic))
    assert error.kind == "context_window" and error.retryable is False
    assert "longer than the context window of Claude Opus 4.8" in error.message
    assert "1000123 tokens > 1000000" in error.message
    assert "Start a new conversation" in error.message


async def test_a_refusal_ends_with_no_content_and_its_details(
    fake_anthropic: FakeAnthropic,
) -> None:
    fake_anthropic.enqueue(Reply.refusal(category="bio"))
    events = await collect(model(fake_anthropic), request(thinking=True))
    assert len(events) == 1 and isinstance(events[0], MessageDone)
    message = events[0].message
    assert message["stop_reason"] == "refusal" and message["content"] == []
    assert message["stop_details"] == {"type": "refusal", "category": "bio"}
    assert message["usage"]["input_tokens"] == message["usage"]["output_tokens"] == 0


async def test_usage_reports_cache_writes_then_reads(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(Reply.text("one"), Reply.text("two"))
    big = request(system="Stable house rules. " * 1200)  # over the 4096-token minimum
    first = (await collect(model(fake_anthropic), big))[-1]
    second = (await collect(model(fake_anthropic), big))[-1]
    assert isinstance(first, MessageDone) and isinstance(second, MessageDone)
    written = first.message["usage"]["cache_creation_input_tokens"]
    assert written > 4096 and first.message["usage"]["cache_read_input_tokens"] == 0
    assert second.message["usage"]["cache_read_input_tokens"] == written
    assert second.message["usage"]["cache_creation_input_tokens"] == 0


def test_an_unknown_effort_is_refused_when_the_request_is_built() -> None:
    with pytest.raises(ValueError, match='effort "extreme" is not one of low, medium, high'):
        request(effort="extreme")


def test_the_default_client_is_claude_when_a_key_is_set(settings) -> None:
    settings.ANTHROPIC_API_KEY = "sk-test"
    settings.ANTHROPIC_BASE_URL = "http://127.0.0.1:1"
    settings.ANTHROPIC_MODEL = "claude-sonnet-4-6"
    client = default_client()
    assert isinstance(client, AnthropicModel)
    assert client.model == "claude-sonnet-4-6"
    assert client.label == "Claude (claude-sonnet-4-6)"
    assert client.is_demo is False
    assert client.models == tuple(settings.ANTHROPIC_MODELS)


def test_the_default_client_is_the_demo_model_without_a_key(settings) -> None:
    settings.ANTHROPIC_API_KEY = ""
    client = default_client()
    assert isinstance(client, DemoModel)
    assert client.is_demo is True
    assert client.label == "Demo model (offline)"


class _BrokenStream:
    """An SDK stream that answered, then fails with `error` on its first read."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    async def __aenter__(self) -> _BrokenStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def __aiter__(self) -> _BrokenStream:
        return self

    async def __anext__(self) -> Any:
        raise self.error


class _Messages:
    def __init__(self, *, on_create: BaseException | None, on_read: BaseException) -> None:
        self.on_create, self.on_read = on_create, on_read

    async def create(self, **kwargs: Any) -> _BrokenStream:
        if self.on_create is not None:
            raise self.on_create
        return _BrokenStream(self.on_read)


def _with_sdk_raising(*, on_create: BaseException | None, on_read: BaseException) -> AnthropicModel:
    client = AnthropicModel(api_key="k", base_url="http://127.0.0.1:9", model="m", max_retries=0)
    sdk = SimpleNamespace(messages=_Messages(on_create=on_create, on_read=on_read))

    async def the_sdk() -> Any:
        return sdk

    client._client_for_running_loop = the_sdk  # type: ignore[method-assign]
    return client


def _connection_error() -> anthropic.APIConnectionError:
    return anthropic.APIConnectionError(request=httpx2.Request("POST", "http://127.0.0.1:9"))


async def test_a_connection_lost_after_the_api_answered_is_a_cut() -> None:
    error, _ = await failure(_with_sdk_raising(on_create=None, on_read=_connection_error()))
    assert error.kind == "stream_cut"
    assert "cut before the reply finished" in error.message


async def test_a_connection_lost_before_the_api_answered_is_a_connection_error() -> None:
    client = _with_sdk_raising(on_create=_connection_error(), on_read=RuntimeError("unread"))
    error, _ = await failure(client)
    assert error.kind == "connection"
