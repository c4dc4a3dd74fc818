"""The fake server thinks like the API, proved through the real SDK: a signed thinking block before
the answer, and a 400 when a continued tool loop drops or alters it."""

from __future__ import annotations

import copy
from typing import Any

import anthropic
import pytest

from tests.support.fake_anthropic import FakeAnthropic, Reply, tool_use_block

BASH_TOOL = {
    "name": "Bash",
    "description": "Run a shell command.",
    "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
}
ASK = [{"role": "user", "content": "how many files are there?"}]
SUMMARIZED = {"type": "adaptive", "display": "summarized"}


def client(fake: FakeAnthropic) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(api_key="k", base_url=fake.base_url, max_retries=0)


async def stream(fake: FakeAnthropic, **kwargs: Any) -> tuple[list[Any], Any]:
    kwargs.setdefault("max_tokens", 4000)
    kwargs.setdefault("messages", ASK)
    kwargs.setdefault("tools", [BASH_TOOL])
    async with client(fake).messages.stream(**kwargs) as s:
        events = [event async for event in s]
        return events, await s.get_final_message()


def as_param(block: Any) -> dict[str, Any]:
    return block.to_dict(mode="json", exclude_none=True)


async def tool_turn(fake: FakeAnthropic, model: str, **kwargs: Any) -> list[dict[str, Any]]:
    """One thinking tool call; returns the messages of the continued loop, untouched."""
    fake.enqueue(Reply.tool_use("Bash", {"command": "ls | wc -l"}, id="toolu_t1"))
    _, final = await stream(fake, model=model, **kwargs)
    result = {"type": "tool_result", "tool_use_id": "toolu_t1", "content": "3"}
    return [
        *ASK,
        {"role": "assistant", "content": [as_param(b) for b in final.content]},
        {"role": "user", "content": [result]},
    ]


async def test_thinking_on_streams_a_signed_summary_before_the_answer(
    fake_anthropic: FakeAnthropic,
) -> None:
    fake_anthropic.enqueue(Reply.text("Three."))
    events, final = await stream(fake_anthropic, model="claude-opus-4-8", thinking=SUMMARIZED)
    deltas = [e.delta for e in events if e.type == "content_block_delta"]
    assert [d.type for d in deltas][-2:] == ["signature_delta", "text_delta"]
    assert any(d.type == "thinking_delta" for d in deltas)
    thinking, text = final.content
    assert thinking.type == "thinking"
    assert "how many files are there?" in thinking.thinking
    assert thinking.signature.startswith("sig_")
    assert text.text == "Three."


@pytest.mark.parametrize("model", ["claude-sonnet-5", "claude-fable-5"])
async def test_models_that_think_by_default_think_when_thinking_is_omitted(
    fake_anthropic: FakeAnthropic, model: str
) -> None:
    fake_anthropic.enqueue(Reply.text("Three."))
    events, final = await stream(fake_anthropic, model=model)
    thinking = final.content[0]
    # The default display is "omitted": empty thinking text, but a signature all the same.
    assert (thinking.type, thinking.thinking) == ("thinking", "")
    assert thinking.signature
    thinking_deltas = [
        e for e in events if e.type == "content_block_delta" and e.delta.type == "thinking_delta"
    ]
    assert thinking_deltas == []


@pytest.mark.parametrize(
    ("model", "params"),
    [
        ("claude-opus-4-8", {}),
        ("claude-sonnet-5", {"thinking": {"type": "disabled"}}),
        ("claude-haiku-4-5", {}),
    ],
)
async def test_without_thinking_the_answer_comes_alone(
    fake_anthropic: FakeAnthropic, model: str, params: dict[str, Any]
) -> None:
    fake_anthropic.enqueue(Reply.text("Three."))
    _, final = await stream(fake_anthropic, model=model, **params)
    assert [b.type for b in final.content] == ["text"]


async def test_budget_thinking_on_haiku_comes_summarized(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(Reply.text("Three."))
    _, final = await stream(
        fake_anthropic,
        model="claude-haiku-4-5",
        thinking={"type": "enabled", "budget_tokens": 2000},
    )
    assert final.content[0].type == "thinking" and final.content[0].thinking


async def test_a_continued_tool_loop_with_its_thinking_unchanged_is_served(
    fake_anthropic: FakeAnthropic,
) -> None:
    messages = await tool_turn(fake_anthropic, "claude-sonnet-5")
    assert messages[1]["content"][0]["type"] == "thinking"
    fake_anthropic.enqueue(Reply.text("There are 3."))
    _, final = await stream(fake_anthropic, model="claude-sonnet-5", messages=messages)
    assert final.content[-1].text == "There are 3."


def drop_thinking(messages: list[dict[str, Any]]) -> None:
    messages[1]["content"] = messages[1]["content"][1:]


def alter_text(messages: list[dict[str, Any]]) -> None:
    messages[1]["content"][0]["thinking"] += " (edited)"


def alter_signature(messages: list[dict[str, Any]]) -> None:
    messages[1]["content"][0]["signature"] = "sig_forged"


def move_thinking_last(messages: list[dict[str, Any]]) -> None:
    content = messages[1]["content"]
    messages[1]["content"] = [*content[1:], content[0]]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (drop_thinking, "Expected `thinking` or `redacted_thinking`, but found `tool_use`"),
        (alter_text, "Invalid `signature` in `thinking` block"),
        (alter_signature, "Invalid `signature` in `thinking` block"),
        (move_thinking_last, "but found `tool_use`"),
    ],
)
async def test_a_continued_tool_loop_that_drops_or_alters_its_thinking_is_a_400(
    fake_anthropic: FakeAnthropic, change: Any, expected: str
) -> None:
    messages = await tool_turn(
        fake_anthropic, "claude-opus-4-8", thinking=SUMMARIZED, output_config={"effort": "low"}
    )
    changed = copy.deepcopy(messages)
    change(changed)
    fake_anthropic.enqueue(Reply.text("never"))
    with pytest.raises(anthropic.BadRequestError) as caught:
        await stream(fake_anthropic, model="claude-opus-4-8", thinking=SUMMARIZED, messages=changed)
    assert expected in str(caught.value.api_message)
    # The unchanged history is still served: the rejection used no scripted reply.
    _, final = await stream(
        fake_anthropic, model="claude-opus-4-8", thinking=SUMMARIZED, messages=messages
    )
    assert final.content[-1].text == "never"


async def test_dropping_the_thinking_is_accepted_once_thinking_is_off(
    fake_anthropic: FakeAnthropic,
) -> None:
    messages = await tool_turn(fake_anthropic, "claude-opus-4-8", thinking=SUMMARIZED)
    drop_thinking(messages)
    fake_anthropic.enqueue(Reply.text("ok"))
    _, final = await stream(fake_anthropic, model="claude-opus-4-8", messages=messages)
    assert final.content[-1].text == "ok"


async def test_redacted_thinking_goes_back_unchanged_or_is_a_400(
    fake_anthropic: FakeAnthropic,
) -> None:
    fake_anthropic.enqueue(
        Reply.blocks(
            [
                {"type": "redacted_thinking", "data": "ENCRYPTED-1"},
                tool_use_block("Bash", {"command": "ls"}, id="toolu_r"),
            ]
        )
    )
    _, final = await stream(fake_anthropic, model="claude-opus-4-8", thinking=SUMMARIZED)
    assert as_param(final.content[0]) == {"type": "redacted_thinking", "data": "ENCRYPTED-1"}
    messages = [
        *ASK,
        {"role": "assistant", "content": [as_param(b) for b in final.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_r", "content": "a"}],
        },
    ]
    forged = copy.deepcopy(messages)
    forged[1]["content"][0]["data"] = "ENCRYPTED-2"
    fake_anthropic.enqueue(Reply.text("fine"))
    with pytest.raises(anthropic.BadRequestError, match="Invalid `data` in `redacted_thinking`"):
        await stream(fake_anthropic, model="claude-opus-4-8", thinking=SUMMARIZED, messages=forged)
    _, final = await stream(
        fake_anthropic, model="claude-opus-4-8", thinking=SUMMARIZED, messages=messages
    )
    assert final.content[-1].text == "fine"


async def test_a_scripted_thinking_block_without_a_signature_gets_one(
    fake_anthropic: FakeAnthropic,
) -> None:
    fake_anthropic.enqueue(
        Reply.blocks([{"type": "thinking", "thinking": "plan"}, {"type": "text", "text": "ok"}])
    )
    _, final = await stream(fake_anthropic, model="claude-opus-4-8")
    assert final.content[0].thinking == "plan" and final.content[0].signature.startswith("sig_")


async def test_a_thinking_block_cannot_carry_cache_control(fake_anthropic: FakeAnthropic) -> None:
    messages = await tool_turn(fake_anthropic, "claude-sonnet-5")
    messages[1]["content"][0]["cache_control"] = {"type": "ephemeral"}
    with pytest.raises(anthropic.BadRequestError, match="Thinking blocks cannot be marked"):
        await stream(fake_anthropic, model="claude-sonnet-5", messages=messages)


# A tool turn the server never answered (an imported session's), closed by the client.
FOREIGN_TOOL_TURN = [
    *ASK,
    {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "toolu_cc1", "name": "Bash", "input": {}}],
    },
]
CLOSED = {"type": "tool_result", "tool_use_id": "toolu_cc1", "content": "not run", "is_error": True}


@pytest.mark.parametrize(
    "last_user",
    [[CLOSED], [CLOSED, {"type": "text", "text": "and now?"}]],
    ids=["results-only", "results-then-a-new-message"],
)
@pytest.mark.parametrize(
    ("model", "params"),
    [
        ("claude-opus-4-8", {"thinking": SUMMARIZED}),
        ("claude-sonnet-5", {}),
        ("claude-fable-5", {}),
        ("claude-haiku-4-5", {"thinking": {"type": "enabled", "budget_tokens": 2000}}),
    ],
)
async def test_with_thinking_on_a_tool_turn_that_never_thought_cannot_be_continued(
    fake_anthropic: FakeAnthropic, model: str, params: dict[str, Any], last_user: list[Any]
) -> None:
    messages = [*FOREIGN_TOOL_TURN, {"role": "user", "content": last_user}]
    with pytest.raises(anthropic.BadRequestError) as caught:
        await stream(fake_anthropic, model=model, messages=messages, **params)
    assert "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found " in (
        caught.value.api_message
    )


@pytest.mark.parametrize(
    ("model", "params"),
    [("claude-opus-4-8", {}), ("claude-sonnet-5", {"thinking": {"type": "disabled"}})],
)
async def test_without_thinking_a_tool_turn_that_never_thought_can_be_continued(
    fake_anthropic: FakeAnthropic, model: str, params: dict[str, Any]
) -> None:
    messages = [*FOREIGN_TOOL_TURN, {"role": "user", "content": [CLOSED]}]
    fake_anthropic.enqueue(Reply.text("ok"))
    _, final = await stream(fake_anthropic, model=model, messages=messages, **params)
    assert final.content[-1].text == "ok"


async def test_with_thinking_on_a_closed_tool_turn_before_an_answer_is_no_longer_checked(
    fake_anthropic: FakeAnthropic,
) -> None:
    messages = [
        *FOREIGN_TOOL_TURN,
        {"role": "user", "content": [CLOSED]},
        {"role": "assistant", "content": [{"type": "text", "text": "It did not run."}]},
        {"role": "user", "content": "try again later then"},
    ]
    fake_anthropic.enqueue(Reply.text("ok"))
    _, final = await stream(fake_anthropic, model="claude-fable-5", messages=messages)
    assert final.content[-1].text == "ok"
