"""Cache breakpoint placement: one pure function, exact placements, never more than 4."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from skills_app.core.caching import with_cache_breakpoints
from tests.support.fake_anthropic import without_cache_control
from tests.support.fake_anthropic_rules import count_breakpoints

CC = {"type": "ephemeral"}
TOOLS = [
    {"name": "Read", "description": "r", "input_schema": {"type": "object"}},
    {"name": "Skill", "description": "catalog", "input_schema": {"type": "object"}},
]


def text(value: str, **extra: Any) -> dict[str, Any]:
    return {"type": "text", "text": value, **extra}


def body(tools: Any, system: Any, messages: Any) -> dict[str, Any]:
    return {"tools": tools, "system": system, "messages": messages}


def test_a_first_request_marks_the_last_tool_the_system_and_the_message() -> None:
    tools, system, messages = with_cache_breakpoints(
        TOOLS, "Be brief.", [{"role": "user", "content": "hi"}]
    )
    assert tools == [TOOLS[0], {**TOOLS[1], "cache_control": CC}]
    assert system == [text("Be brief.", cache_control=CC)]
    assert messages == [{"role": "user", "content": [text("hi", cache_control=CC)]}]


def test_a_later_request_also_marks_where_the_previous_request_ended() -> None:
    history = [
        {"role": "user", "content": [text("hi")]},
        {"role": "assistant", "content": [text("hello")]},
        {"role": "user", "content": [text("more"), text("please")]},
    ]
    _, _, messages = with_cache_breakpoints(TOOLS, "s", history)
    assert messages == [
        {"role": "user", "content": [text("hi", cache_control=CC)]},
        {"role": "assistant", "content": [text("hello")]},
        {"role": "user", "content": [text("more"), text("please", cache_control=CC)]},
    ]


def test_a_tool_loop_marks_the_last_tool_result_and_skips_thinking_blocks() -> None:
    thinking = {"type": "thinking", "thinking": "plan", "signature": "sig"}
    use = {"type": "tool_use", "id": "t1", "name": "Read", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "x"}
    history = [
        {"role": "user", "content": [text("go")]},
        {"role": "assistant", "content": [thinking, use]},
        {"role": "user", "content": [result]},
    ]
    _, _, messages = with_cache_breakpoints([], "", history)
    assert messages[0]["content"] == [text("go", cache_control=CC)]
    assert messages[1]["content"] == [thinking, use]  # the assistant turn is never marked
    assert messages[2]["content"] == [{**result, "cache_control": CC}]
    # A message whose last block is thinking is marked on the block before it.
    _, _, only = with_cache_breakpoints(
        [], "", [{"role": "assistant", "content": [text("a"), thinking]}]
    )
    assert only[0]["content"] == [text("a", cache_control=CC), thinking]


def test_nothing_to_mark_is_left_unmarked() -> None:
    tools, system, messages = with_cache_breakpoints([], "", [{"role": "user", "content": ""}])
    assert (tools, system, messages) == ([], [], [{"role": "user", "content": ""}])


def test_markers_in_the_input_are_replaced_never_added_to() -> None:
    marked = [{"role": "user", "content": [text(str(i), cache_control=CC) for i in range(6)]}]
    system = [text("a", cache_control=CC), text("b", cache_control=CC)]
    tools, out_system, messages = with_cache_breakpoints(TOOLS, system, marked)
    assert count_breakpoints(body(tools, out_system, messages)) == 3
    assert out_system == [text("a"), text("b", cache_control=CC)]
    assert messages[0]["content"][:5] == [text(str(i)) for i in range(5)]


def test_a_lower_limit_keeps_the_stable_prefix_first() -> None:
    tools, system, messages = with_cache_breakpoints(
        TOOLS, "s", [{"role": "user", "content": "hi"}], limit=2
    )
    assert count_breakpoints(body(tools, system, messages)) == 2
    assert "cache_control" in tools[-1] and "cache_control" in system[-1]
    assert messages == [{"role": "user", "content": "hi"}]


blocks = st.one_of(
    st.builds(text, st.text(max_size=5)),
    st.builds(lambda s: {"type": "thinking", "thinking": s, "signature": "x"}, st.text(max_size=3)),
    st.builds(lambda: {"type": "tool_result", "tool_use_id": "t", "content": "r"}),
)
maybe_marked = st.builds(
    lambda block, mark: {**block, "cache_control": CC} if mark else block, blocks, st.booleans()
)
messages_strategy = st.lists(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["user", "assistant"]),
            "content": st.one_of(st.text(max_size=4), st.lists(maybe_marked, max_size=4)),
        }
    ),
    max_size=6,
)


@given(
    tools=st.lists(st.builds(lambda n: {"name": n, "input_schema": {}}, st.text(max_size=3))),
    system=st.one_of(st.text(max_size=4), st.lists(maybe_marked, max_size=3)),
    messages=messages_strategy,
)
def test_any_request_gets_at_most_four_markers_and_its_input_is_untouched(
    tools: list[dict[str, Any]], system: Any, messages: list[dict[str, Any]]
) -> None:
    before = copy.deepcopy((tools, system, messages))
    out = with_cache_breakpoints(tools, system, messages)
    assert (tools, system, messages) == before  # nothing stored is changed
    assert count_breakpoints(body(*out)) <= 4
    for message in out[2]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "thinking":
                assert "cache_control" not in block
    # Without markers, the messages are what was given (a string may become one text block).
    unmarked = without_cache_control(out[2])
    for given_message, sent in zip(messages, unmarked, strict=True):
        if isinstance(given_message["content"], str) and isinstance(sent["content"], list):
            assert sent["content"] == [text(given_message["content"])]
        else:
            assert sent == without_cache_control(given_message)
