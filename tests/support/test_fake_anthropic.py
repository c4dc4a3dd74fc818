"""The fake Anthropic server, proved against the real anthropic SDK so later tests can trust it."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import anthropic
import httpx2
import pytest

from tests.support.fake_anthropic import TEST_MODEL, FakeAnthropic, Reply, tool_use_block

USER_HI = [{"role": "user", "content": "hi"}]
BASH_TOOL = {
    "name": "Bash",
    "description": "Run a shell command.",
    "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
}


def client(fake: FakeAnthropic, *, max_retries: int = 0) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        api_key="test-key", base_url=fake.base_url, max_retries=max_retries
    )


def body_cut_short(error: BaseException) -> bool:
    """Whether an error is, or was caused by, the HTTP body ending mid-stream.

    Older SDKs let httpx's RemoteProtocolError through; newer ones wrap it in APIConnectionError.
    Either way the protocol error is in the chain, and that is what a cut must produce.
    """
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, httpx2.RemoteProtocolError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


async def stream_events(fake: FakeAnthropic, **kwargs: Any) -> tuple[list[Any], Any]:
    kwargs.setdefault("model", TEST_MODEL)
    kwargs.setdefault("max_tokens", 100)
    kwargs.setdefault("messages", USER_HI)
    async with client(fake).messages.stream(**kwargs) as stream:
        events = [event async for event in stream]
        return events, await stream.get_final_message()


async def rejection(fake: FakeAnthropic, **kwargs: Any) -> str:
    fake.enqueue(Reply.text("should not be sent"))
    kwargs.setdefault("model", TEST_MODEL)
    kwargs.setdefault("max_tokens", 100)
    with pytest.raises(anthropic.BadRequestError) as caught:
        # Streaming: the SDK refuses a non-streaming call with a large max_tokens by itself.
        async with client(fake).messages.stream(**kwargs) as stream:
            await stream.get_final_message()
    assert caught.value.type == "invalid_request_error"
    assert fake.requests[-1].status == 400
    return str(caught.value.api_message)


async def test_it_streams_text_in_several_deltas(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(Reply.text("Hello from the fake server", chunk=5))
    events, final = await stream_events(fake_anthropic)
    deltas = [e.delta.text for e in events if e.type == "content_block_delta"]
    assert len(deltas) == 6
    assert "".join(deltas) == "Hello from the fake server"
    assert [e.type for e in events][0] == "message_start"
    assert events[-1].type == "message_stop"
    assert final.stop_reason == "end_turn"
    assert final.model == TEST_MODEL
    assert final.usage.input_tokens > 0


async def test_it_sends_a_ping_like_the_real_api(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(Reply.text("hi"))
    async with httpx2.AsyncClient() as http:
        response = await http.post(
            f"{fake_anthropic.base_url}/v1/messages",
            json={"model": TEST_MODEL, "max_tokens": 10, "messages": USER_HI, "stream": True},
        )
    body = response.text
    assert "event: ping" in body
    assert body.index("event: message_start") < body.index("event: ping")


async def test_it_streams_tool_input_as_several_json_chunks(
    fake_anthropic: FakeAnthropic,
) -> None:
    fake_anthropic.enqueue(
        Reply.tool_use("Bash", {"command": "ls -la /tmp"}, text="Let me look.", id="toolu_1")
    )
    events, final = await stream_events(fake_anthropic, tools=[BASH_TOOL])
    pieces = [
        e.delta.partial_json
        for e in events
        if e.type == "content_block_delta" and e.delta.type == "input_json_delta"
    ]
    assert len(pieces) == 3
    assert final.stop_reason == "tool_use"
    assert final.content[0].text == "Let me look."
    assert final.content[1].id == "toolu_1"
    assert final.content[1].input == {"command": "ls -la /tmp"}


async def test_it_sends_several_tool_uses_in_one_reply(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(
        Reply.blocks(
            [tool_use_block("Bash", {"command": "a"}), tool_use_block("Bash", {"command": "b"})]
        )
    )
    _, final = await stream_events(fake_anthropic, tools=[BASH_TOOL])
    assert [b.input["command"] for b in final.content] == ["a", "b"]
    assert final.content[0].id != final.content[1].id
    assert final.stop_reason == "tool_use"


async def test_it_streams_a_thinking_block(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(
        Reply.blocks(
            [
                {"type": "thinking", "thinking": "hmm", "signature": "s1"},
                {"type": "text", "text": "ok"},
            ]
        )
    )
    _, final = await stream_events(fake_anthropic)
    assert final.content[0].thinking == "hmm"
    assert final.content[0].signature == "s1"


@pytest.mark.parametrize("stop_reason", ["end_turn", "max_tokens", "refusal", "pause_turn"])
async def test_it_passes_custom_stop_reasons(
    fake_anthropic: FakeAnthropic, stop_reason: str
) -> None:
    fake_anthropic.enqueue(Reply.text("partial", stop_reason=stop_reason))
    _, final = await stream_events(fake_anthropic)
    assert final.stop_reason == stop_reason


async def test_it_can_answer_with_no_content_blocks(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(Reply.empty())
    _, final = await stream_events(fake_anthropic)
    assert final.content == []
    assert final.stop_reason == "end_turn"


async def test_it_answers_non_streaming_requests(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(Reply.tool_use("Bash", {"command": "pwd"}, text="ok"))
    message = await client(fake_anthropic).messages.create(
        model=TEST_MODEL, max_tokens=10, messages=USER_HI, tools=[BASH_TOOL]
    )
    assert message.content[0].text == "ok"
    assert message.content[1].input == {"command": "pwd"}
    assert message.stop_reason == "tool_use"


async def test_it_records_bodies_and_headers_in_order(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(Reply.text("one"), Reply.text("two"))
    await stream_events(fake_anthropic, system="be brief")
    await stream_events(fake_anthropic, model="claude-sonnet-4-6")
    first, second = fake_anthropic.requests
    assert first["system"] == "be brief"
    assert first["stream"] is True
    assert first.api_key == "test-key"
    assert first.headers["anthropic-version"]
    assert first.path == "/v1/messages"
    assert second["model"] == "claude-sonnet-4-6"


async def test_it_uses_the_responder_when_the_queue_is_empty(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(Reply.text("queued"))
    fake_anthropic.set_responder(
        lambda request: Reply.text(f"echo {request['messages'][0]['content']}")
    )
    _, first = await stream_events(fake_anthropic)
    _, second = await stream_events(fake_anthropic)
    assert first.content[0].text == "queued"
    assert second.content[0].text == "echo hi"


async def test_it_fails_clearly_without_a_reply_queued(fake_anthropic: FakeAnthropic) -> None:
    with pytest.raises(anthropic.InternalServerError, match="no reply queued"):
        await client(fake_anthropic, max_retries=2).messages.create(
            model=TEST_MODEL, max_tokens=10, messages=USER_HI
        )
    assert len(fake_anthropic.requests) == 1


async def test_it_returns_api_errors_with_retry_headers(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(Reply.error(429, "rate_limit_error", "Slow down"))
    with pytest.raises(anthropic.RateLimitError) as caught:
        await client(fake_anthropic).messages.create(
            model=TEST_MODEL, max_tokens=10, messages=USER_HI
        )
    assert caught.value.api_message == "Slow down"
    assert caught.value.response.headers["retry-after"] == "0"


async def test_the_sdk_retries_a_429_and_then_succeeds(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(
        Reply.error(429, "rate_limit_error", "Slow down"), Reply.text("after retry")
    )
    message = await client(fake_anthropic, max_retries=2).messages.create(
        model=TEST_MODEL, max_tokens=10, messages=USER_HI
    )
    assert message.content[0].text == "after retry"
    assert len(fake_anthropic.requests) == 2


@pytest.mark.parametrize(
    ("status", "error_type", "exception"),
    [
        (529, "overloaded_error", anthropic.OverloadedError),
        (500, "api_error", anthropic.InternalServerError),
        (400, "invalid_request_error", anthropic.BadRequestError),
        (404, "not_found_error", anthropic.NotFoundError),
    ],
)
async def test_it_returns_each_error_status(
    fake_anthropic: FakeAnthropic, status: int, error_type: str, exception: type[Exception]
) -> None:
    fake_anthropic.enqueue(Reply.error(status, error_type, "nope"))
    with pytest.raises(exception):
        await client(fake_anthropic).messages.create(
            model=TEST_MODEL, max_tokens=10, messages=USER_HI
        )


async def test_it_checks_the_api_key_when_given_one() -> None:
    with FakeAnthropic(api_key="right") as fake:
        fake.enqueue(Reply.text("hi"))
        with pytest.raises(anthropic.AuthenticationError):
            await client(fake).messages.create(model=TEST_MODEL, max_tokens=10, messages=USER_HI)


async def test_a_cut_after_n_events_breaks_the_sdk_stream(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(Reply.text("Hello world, this is long", chunk=4, cut_after_events=5))
    seen: list[str] = []
    with pytest.raises((httpx2.RemoteProtocolError, anthropic.APIConnectionError)) as raised:
        async with client(fake_anthropic).messages.stream(
            model=TEST_MODEL, max_tokens=10, messages=USER_HI
        ) as stream:
            async for event in stream:
                seen.append(event.type)
    assert body_cut_short(raised.value)
    # message_start, (ping is hidden by the SDK), block start, two deltas = 5 events sent
    assert seen.count("content_block_delta") == 2


async def test_a_cut_inside_tool_json_breaks_the_sdk_stream(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(Reply.tool_use("Bash", {"command": "ls"}, cut_after_events=4))
    with pytest.raises((httpx2.RemoteProtocolError, anthropic.APIConnectionError)) as raised:
        await stream_events(fake_anthropic, tools=[BASH_TOOL])
    assert body_cut_short(raised.value)


async def test_no_message_stop_ends_the_stream_quietly(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(Reply.text("hi", no_message_stop=True))
    events, final = await stream_events(fake_anthropic)
    assert "message_stop" not in [e.type for e in events]
    assert final.content[0].text == "hi"


async def test_invalid_tool_json_makes_the_sdk_raise(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(Reply.tool_use("Bash", raw_json='{"command": ls}'))
    with pytest.raises(ValueError, match="Unable to parse tool parameter JSON"):
        await stream_events(fake_anthropic, tools=[BASH_TOOL])


async def test_an_sse_error_event_makes_the_sdk_raise(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(Reply.text("hello", error_event_after=4))
    with pytest.raises(anthropic.APIStatusError) as caught:
        await stream_events(fake_anthropic)
    assert caught.value.type == "overloaded_error"


async def test_a_delay_slows_each_event(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(Reply.text("abcdefgh", chunk=2, delay=0.05))
    loop = asyncio.get_running_loop()
    started = loop.time()
    await stream_events(fake_anthropic)
    assert loop.time() - started >= 0.05 * 6


async def test_a_reply_waits_on_an_event_mid_stream(fake_anthropic: FakeAnthropic) -> None:
    release, reached = threading.Event(), threading.Event()
    fake_anthropic.enqueue(
        Reply.text("before after", chunk=7, wait_for=release, wait_after_events=4, reached=reached)
    )
    async with client(fake_anthropic).messages.stream(
        model=TEST_MODEL, max_tokens=10, messages=USER_HI
    ) as stream:
        texts: list[str] = []
        async for event in stream:
            if event.type == "content_block_delta":
                texts.append(event.delta.text)
                if len(texts) == 1:
                    assert await asyncio.to_thread(reached.wait, 5)
                    await asyncio.sleep(0.1)
                    assert texts == ["before "]  # nothing more arrives while paused
                    release.set()
    assert texts == ["before ", "after"]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"max_tokens": 5, "messages": USER_HI}, "model: Field required"),
        ({"model": TEST_MODEL, "messages": USER_HI}, "max_tokens: Field required"),
        ({"model": TEST_MODEL, "max_tokens": 5}, "messages: Field required"),
    ],
)
async def test_it_rejects_missing_required_fields(
    fake_anthropic: FakeAnthropic, body: dict[str, Any], expected: str
) -> None:
    fake_anthropic.enqueue(Reply.text("never"))
    async with httpx2.AsyncClient() as http:
        response = await http.post(f"{fake_anthropic.base_url}/v1/messages", json=body)
    assert response.status_code == 400
    assert response.json()["type"] == "error"
    assert response.json()["error"] == {"type": "invalid_request_error", "message": expected}


TOOL_TURN = [
    {"role": "user", "content": "list files"},
    {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "toolu_a", "name": "Bash", "input": {}}],
    },
]


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ([], "at least one message"),
        ([{"role": "assistant", "content": "hi"}], 'first message must use the "user" role'),
        (
            [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
            "roles must alternate",
        ),
        (
            [*TOOL_TURN, {"role": "user", "content": "no result"}],
            "`tool_use` ids were found without `tool_result` blocks immediately after: toolu_a",
        ),
        (
            [
                *TOOL_TURN,
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_a", "content": "x"},
                        {"type": "tool_result", "tool_use_id": "toolu_zz", "content": "y"},
                    ],
                },
            ],
            "unexpected `tool_use_id` found in `tool_result` blocks: toolu_zz",
        ),
        (
            [
                *TOOL_TURN,
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "first"},
                        {"type": "tool_result", "tool_use_id": "toolu_a", "content": "x"},
                    ],
                },
            ],
            "`tool_result` blocks must come first",
        ),
        (
            [{"role": "user", "content": [{"type": "text", "text": ""}]}],
            "text content blocks must be non-empty",
        ),
        ([{"role": "user", "content": []}], "must have non-empty content"),
        ([{"role": "user", "content": ""}], "must have non-empty content"),
        (
            [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Sure "}],
            "final assistant content cannot end with trailing whitespace",
        ),
        ([{"role": "user", "content": [{"type": "banana", "text": "x"}]}], "Input tag 'banana'"),
        (TOOL_TURN, "`tool_use` ids were found without `tool_result` blocks"),
    ],
)
async def test_it_rejects_invalid_messages_like_the_real_api(
    fake_anthropic: FakeAnthropic, messages: list[dict[str, Any]], expected: str
) -> None:
    message = await rejection(fake_anthropic, messages=messages, tools=[BASH_TOOL])
    assert expected in message


async def test_it_accepts_a_well_formed_tool_round_trip(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(Reply.text("done"))
    messages = [
        *TOOL_TURN,
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "a.txt"},
                {"type": "text", "text": "Base directory for this skill: /x"},
            ],
        },
    ]
    _, final = await stream_events(fake_anthropic, messages=messages, tools=[BASH_TOOL])
    assert final.content[0].text == "done"
    assert fake_anthropic.requests[-1].status == 200


@pytest.mark.parametrize(
    ("tools", "expected"),
    [
        (
            [{"description": "x", "input_schema": {"type": "object"}}],
            "tools.0.name: Field required",
        ),
        ([{"name": "Bash", "description": "x"}], "tools.0.input_schema: Field required"),
        ([BASH_TOOL, BASH_TOOL], "Tool names must be unique"),
    ],
)
async def test_it_rejects_bad_tool_definitions(
    fake_anthropic: FakeAnthropic, tools: list[dict[str, Any]], expected: str
) -> None:
    message = await rejection(fake_anthropic, messages=USER_HI, tools=tools)
    assert expected in message


async def test_rejected_requests_are_recorded_and_do_not_use_the_queue(
    fake_anthropic: FakeAnthropic,
) -> None:
    await rejection(fake_anthropic, messages=[{"role": "assistant", "content": "x"}])
    assert fake_anthropic.requests[0].rejection is not None
    _, final = await stream_events(fake_anthropic)
    assert final.content[0].text == "should not be sent"


# -- models, their settings, refusals ---------------------------------------------------------


async def test_an_unknown_model_id_is_a_404_like_the_api(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(Reply.text("kept for later"))
    with pytest.raises(anthropic.NotFoundError) as caught:
        await client(fake_anthropic).messages.create(
            model="claude-sonnet-5-5", max_tokens=10, messages=USER_HI
        )
    assert caught.value.type == "not_found_error"
    assert caught.value.api_message == "model: claude-sonnet-5-5"
    assert fake_anthropic.requests[-1].status == 404
    _, final = await stream_events(fake_anthropic)  # the refused request used no reply
    assert final.content[0].text == "kept for later"


async def test_a_dated_full_model_id_is_served(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(Reply.text("hi"))
    _, final = await stream_events(fake_anthropic, model="claude-haiku-4-5-20251001")
    assert final.content[0].text == "hi"


@pytest.mark.parametrize(
    ("model", "params", "expected"),
    [
        (
            "claude-opus-4-8",
            {"thinking": {"type": "enabled", "budget_tokens": 2000}},
            "thinking.type.enabled is not supported for claude-opus-4-8",
        ),
        (
            "claude-sonnet-5",
            {"thinking": {"type": "enabled", "budget_tokens": 2000}},
            "thinking.type.enabled is not supported for claude-sonnet-5",
        ),
        ("claude-opus-4-8", {"temperature": 0.5}, "temperature: sampling parameters"),
        ("claude-fable-5", {"top_p": 0.9}, "top_p: sampling parameters"),
        ("claude-fable-5", {"thinking": {"type": "disabled"}}, "thinking.type.disabled"),
        ("claude-haiku-4-5", {"output_config": {"effort": "low"}}, "does not support the effort"),
        ("claude-haiku-4-5", {"thinking": {"type": "adaptive"}}, "adaptive thinking is not"),
        ("claude-opus-4-6", {"output_config": {"effort": "xhigh"}}, "'xhigh' is not supported"),
        ("claude-opus-4-8", {"max_tokens": 128_001}, "128000, which is the maximum allowed"),
        ("claude-haiku-4-5", {"temperature": 0.2, "top_p": 0.5}, "cannot both be specified"),
        (
            "claude-sonnet-4-6",
            {"temperature": 0.2, "thinking": {"type": "adaptive"}},
            "temperature may only be set to 1 when thinking is enabled",
        ),
        (
            "claude-haiku-4-5",
            {"max_tokens": 1500, "thinking": {"type": "enabled", "budget_tokens": 1500}},
            "max_tokens must be greater than thinking.budget_tokens",
        ),
        (
            "claude-haiku-4-5",
            {"thinking": {"type": "enabled", "budget_tokens": 500}},
            "greater than or equal to 1024",
        ),
    ],
)
async def test_a_setting_the_model_rejects_is_a_400(
    fake_anthropic: FakeAnthropic, model: str, params: dict[str, Any], expected: str
) -> None:
    body = {"max_tokens": 4000, **params}
    sampling = {k: body.pop(k) for k in ("temperature", "top_p") if k in body}
    message = await rejection(
        fake_anthropic, model=model, messages=USER_HI, extra_body=sampling or None, **body
    )
    assert expected in message


@pytest.mark.parametrize(
    ("model", "params"),
    [
        ("claude-opus-4-8", {"thinking": {"type": "disabled"}, "output_config": {"effort": "max"}}),
        ("claude-sonnet-5", {"output_config": {"effort": "xhigh"}}),
        ("claude-opus-4-6", {"thinking": {"type": "enabled", "budget_tokens": 2000}}),
        ("claude-haiku-4-5", {"extra_body": {"temperature": 0.3}}),
        ("claude-sonnet-4-6", {"extra_body": {"temperature": 1}, "thinking": {"type": "adaptive"}}),
    ],
)
@pytest.mark.filterwarnings("ignore:Using Claude with:UserWarning")  # the SDK's own advice
async def test_settings_the_model_accepts_are_served(
    fake_anthropic: FakeAnthropic, model: str, params: dict[str, Any]
) -> None:
    fake_anthropic.enqueue(Reply.text("fine"))
    _, final = await stream_events(fake_anthropic, model=model, max_tokens=4000, **params)
    assert final.content[-1].text == "fine"


async def test_a_scripted_refusal_has_no_content_and_costs_nothing(
    fake_anthropic: FakeAnthropic,
) -> None:
    fake_anthropic.enqueue(Reply.refusal(category="cyber"))
    events, final = await stream_events(fake_anthropic, model="claude-fable-5")
    assert final.stop_reason == "refusal"
    assert final.content == []
    assert final.stop_details.category == "cyber"
    assert not [e for e in events if e.type == "content_block_start"]  # no thinking either
    assert (final.usage.input_tokens, final.usage.output_tokens) == (0, 0)
    assert final.usage.cache_read_input_tokens == final.usage.cache_creation_input_tokens == 0


async def test_the_refuse_directive_refuses_without_using_a_reply(
    fake_anthropic: FakeAnthropic,
) -> None:
    fake_anthropic.enqueue(Reply.text("the scripted answer"))
    _, refused = await stream_events(
        fake_anthropic, messages=[{"role": "user", "content": "do it [[refuse]]"}]
    )
    assert refused.stop_reason == "refusal" and refused.content == []
    assert refused.stop_details.type == "refusal"
    _, answered = await stream_events(fake_anthropic)
    assert answered.content[0].text == "the scripted answer"
