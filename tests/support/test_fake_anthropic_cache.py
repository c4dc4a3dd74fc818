"""The fake server's prompt cache, proved through the real SDK: usage split into uncached, written
and read tokens from the prefixes it saw before, like the API."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from tests.support.fake_anthropic import REFUSE_DIRECTIVE, TEST_MODEL, FakeAnthropic, Reply
from tests.support.fake_anthropic_cache import PromptCache, worst_case_tokens

CC = {"type": "ephemeral"}
TOOL = {
    "name": "Bash",
    "description": "Run a shell command.",
    "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
}
SYSTEM_TEXT = "You are a careful assistant. " * 40


def tokens(*blocks: dict[str, Any]) -> int:
    """The fake's count: characters / 4 (rounded up) of each block's canonical JSON."""
    return sum(
        math.ceil(len(json.dumps(b, sort_keys=True, ensure_ascii=False, separators=(",", ":"))) / 4)
        for b in blocks
    )


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def marked(block: dict[str, Any]) -> dict[str, Any]:
    return {**block, "cache_control": CC}


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    """A fake server that writes every breakpoint (no model minimum), so figures stay small."""
    with FakeAnthropic(cache_minimum=False) as server:
        yield server


async def usage(
    fake: FakeAnthropic, *, reply: Reply | None = None, **kwargs: Any
) -> dict[str, int]:
    """Send one request (answered by `reply`, or "ok" when None) and return its usage split."""
    fake.enqueue(reply or Reply.text("ok"))
    kwargs.setdefault("model", TEST_MODEL)
    client = anthropic.AsyncAnthropic(api_key="k", base_url=fake.base_url, max_retries=0)
    async with client.messages.stream(max_tokens=100, **kwargs) as stream:
        final = await stream.get_final_message()
    return {
        "input": final.usage.input_tokens,
        "written": final.usage.cache_creation_input_tokens,
        "read": final.usage.cache_read_input_tokens,
    }


def prefix_request(*messages: dict[str, Any]) -> dict[str, Any]:
    return {
        "tools": [marked(TOOL)],
        "system": [marked(text(SYSTEM_TEXT))],
        "messages": list(messages),
    }


async def test_a_prefix_is_written_once_then_read(fake: FakeAnthropic) -> None:
    request = prefix_request({"role": "user", "content": "hi"})
    prefix = tokens(TOOL, text(SYSTEM_TEXT))
    total = prefix + tokens(text("hi"))
    assert await usage(fake, **request) == {"input": total - prefix, "written": prefix, "read": 0}
    assert await usage(fake, **request) == {"input": total - prefix, "written": 0, "read": prefix}


async def test_a_growing_conversation_reads_the_last_request_and_writes_the_rest(
    fake: FakeAnthropic,
) -> None:
    first = {"role": "user", "content": [marked(text("hi"))]}
    prefix = tokens(TOOL, text(SYSTEM_TEXT))
    one = await usage(fake, **prefix_request(first))
    assert one == {"input": 0, "written": prefix + tokens(text("hi")), "read": 0}
    # The next turn: the first message no longer marked, the new last block is.
    second = [
        {"role": "user", "content": [text("hi")]},
        {"role": "assistant", "content": [text("hello")]},
        {"role": "user", "content": [marked(text("tell me more"))]},
    ]
    two = await usage(fake, **prefix_request(*second))
    read = prefix + tokens(text("hi"))
    assert two == {
        "input": 0,
        "written": tokens(text("hello"), text("tell me more")),
        "read": read,
    }
    assert sum(two.values()) == read + tokens(text("hello"), text("tell me more"))


async def test_the_lookback_for_an_earlier_entry_is_20_blocks(fake: FakeAnthropic) -> None:
    first = text("block 0")
    await usage(fake, messages=[{"role": "user", "content": [marked(first)]}])

    def after_first(count: int, label: str) -> list[dict[str, Any]]:
        later = [text(f"{label} {i}") for i in range(1, count + 1)]
        return [first, *later[:-1], marked(later[-1])]

    near = await usage(fake, messages=[{"role": "user", "content": after_first(20, "near")}])
    assert near["read"] == tokens(first)  # 20 blocks before the breakpoint: found
    far = await usage(fake, messages=[{"role": "user", "content": after_first(21, "far")}])
    assert far["read"] == 0  # 21 blocks before: out of reach, all written again
    assert far["written"] == tokens(first, *(text(f"far {i}") for i in range(1, 22)))


async def test_caches_belong_to_one_model(fake: FakeAnthropic) -> None:
    request = prefix_request({"role": "user", "content": "hi"})
    await usage(fake, **request)
    other = await usage(fake, model="claude-sonnet-4-6", **request)
    assert other["read"] == 0 and other["written"] > 0


async def test_turning_thinking_on_keeps_tools_and_system_but_not_the_messages(
    fake: FakeAnthropic,
) -> None:
    request = prefix_request({"role": "user", "content": [marked(text("hi"))]})
    await usage(fake, **request)
    thinking = await usage(fake, thinking={"type": "adaptive"}, **request)
    assert thinking == {
        "input": 0,
        "written": tokens(text("hi")),
        "read": tokens(TOOL, text(SYSTEM_TEXT)),
    }


async def test_entries_expire_five_minutes_after_their_last_use(fake: FakeAnthropic) -> None:
    now = [1000.0]
    fake.cache = PromptCache(clock=lambda: now[0])
    request = prefix_request({"role": "user", "content": "hi"})
    await usage(fake, **request)
    now[0] += 299
    assert (await usage(fake, **request))["read"] > 0  # a read refreshes the entry
    now[0] += 299
    assert (await usage(fake, **request))["read"] > 0
    now[0] += 301
    assert (await usage(fake, **request))["read"] == 0


async def test_a_prefix_below_the_models_minimum_is_never_cached() -> None:
    with FakeAnthropic() as fake:  # the model minimum on (claude-opus-4-8: 4096 tokens)
        small = prefix_request({"role": "user", "content": "hi"})
        assert (await usage(fake, **small))["written"] == 0
        assert (await usage(fake, **small))["read"] == 0
        big_system = "Long house rules. " * 1000  # 18,000 characters: over 4096 tokens
        big = {**small, "system": [marked(text(big_system))]}
        prefix = tokens(TOOL, text(big_system))
        assert prefix >= 4096
        assert (await usage(fake, **big))["written"] == prefix
        assert (await usage(fake, **big))["read"] == prefix


async def test_a_refusal_is_not_billed_and_caches_nothing(fake: FakeAnthropic) -> None:
    request = prefix_request({"role": "user", "content": "hi"})
    assert await usage(fake, reply=Reply.refusal(), **request) == {
        "input": 0,
        "written": 0,
        "read": 0,
    }
    assert (await usage(fake, **request))["read"] == 0  # the refusal wrote nothing
    refused = prefix_request({"role": "user", "content": f"hi {REFUSE_DIRECTIVE}"})
    assert await usage(fake, **refused) == {"input": 0, "written": 0, "read": 0}


async def test_more_than_four_breakpoints_is_a_400(fake: FakeAnthropic) -> None:
    blocks = [marked(text(f"part {i}")) for i in range(3)]
    four = {**prefix_request({"role": "user", "content": blocks[:2]})}
    assert (await usage(fake, **four))["written"] > 0
    five = prefix_request({"role": "user", "content": blocks})
    with pytest.raises(anthropic.BadRequestError) as caught:
        await usage(fake, **five)
    assert caught.value.api_message == (
        "A maximum of 4 blocks with cache_control may be provided. Found 5."
    )


def test_the_worst_case_tokenizer_counts_a_token_per_byte_outside_ascii() -> None:
    # Eight ASCII characters are 2 tokens; an emoji is 4 bytes, an "é" 2.
    assert worst_case_tokens("abcdefgh\N{GRINNING FACE}\N{LATIN SMALL LETTER E WITH ACUTE}") == 8


async def test_a_server_with_the_worst_case_tokenizer_bills_emoji_by_their_bytes(
    fake: FakeAnthropic,
) -> None:
    fake.tokenizer = worst_case_tokens
    emoji = "\N{GRINNING FACE}" * 100
    block = json.dumps(text(emoji), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    expected = math.ceil((len(block) - 100) / 4) + 400
    figures = await usage(fake, messages=[{"role": "user", "content": emoji}])
    assert figures == {"input": expected, "written": 0, "read": 0}
