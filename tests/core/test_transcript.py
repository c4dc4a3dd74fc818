"""Stored rows -> API messages: thinking passes through unchanged; failed and refused turns are left
out of later requests until the user retries them."""

from __future__ import annotations

import copy

import pytest

from skills_app.core.llm import ModelRequest
from skills_app.core.transcript import (
    EXCLUDED,
    EXCLUDED_TURN_START,
    StoredMessage,
    exclude_turn,
    result_text,
    retry_turn,
    status_message_text,
    text_of,
    to_api_messages,
    tool_result_block,
    turn_start,
    unanswered_tool_uses,
    with_exclusion,
)

THINKING = {"type": "thinking", "thinking": "I should list the files.", "signature": "sig_1"}
OMITTED = {"type": "thinking", "thinking": "", "signature": "sig_2"}
REDACTED = {"type": "redacted_thinking", "data": "ENCRYPTED"}
TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}


def user(text: str, **kwargs: object) -> StoredMessage:
    return StoredMessage.text("user", text, **kwargs)  # type: ignore[arg-type]


def assistant(*blocks: dict[str, object], **kwargs: object) -> StoredMessage:
    return StoredMessage(role="assistant", content=tuple(blocks), **kwargs)  # type: ignore[arg-type]


def results(*ids: str) -> StoredMessage:
    return StoredMessage(
        role="user", kind="tool_result", content=tuple(tool_result_block(i, "ok") for i in ids)
    )


def notice(text: str) -> StoredMessage:
    return StoredMessage.text("assistant", text, kind="error", to_model=False)


def apply(rows: list[StoredMessage], changes: dict[int, StoredMessage]) -> list[StoredMessage]:
    return [changes.get(i, row) for i, row in enumerate(rows)]


# -- thinking ------------------------------------------------------------------------------------


def test_thinking_blocks_go_back_unchanged_and_first() -> None:
    rows = [
        user("how many files?"),
        assistant(THINKING, {"type": "text", "text": "Let me look."}, TOOL_USE),
        results("toolu_1"),
    ]
    before = copy.deepcopy(rows)
    messages = to_api_messages(rows)
    assert messages[1]["content"] == [THINKING, {"type": "text", "text": "Let me look."}, TOOL_USE]
    # Sending them (with cache breakpoints) changes nothing that is stored.
    ModelRequest("claude-opus-4-8", "s", [], messages, 100, thinking=True).as_kwargs()
    assert rows == before


@pytest.mark.parametrize("block", [OMITTED, REDACTED])
def test_empty_and_redacted_thinking_are_kept_too(block: dict[str, object]) -> None:
    rows = [user("go"), assistant(block, TOOL_USE), results("toolu_1")]
    assert to_api_messages(rows)[1]["content"] == [block, TOOL_USE]


def test_thinking_is_kept_in_a_final_answer_too() -> None:
    rows = [user("hi"), assistant(THINKING, {"type": "text", "text": "Hello. "})]
    assert to_api_messages(rows)[1]["content"] == [THINKING, {"type": "text", "text": "Hello."}]


# -- excluded turns ------------------------------------------------------------------------------


def test_a_refused_turn_is_not_merged_into_the_next_message() -> None:
    rows = [user("first"), assistant({"type": "text", "text": "ok"}), user("something refused")]
    rows = apply(rows, exclude_turn(rows, turn_start(rows), "refusal"))
    rows += [notice("The model declined"), user("something else")]
    assert to_api_messages(rows) == [
        {"role": "user", "content": [{"type": "text", "text": "first"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
        {"role": "user", "content": [{"type": "text", "text": "something else"}]},
    ]


def test_a_turn_starts_at_the_users_message_not_at_its_tool_results() -> None:
    rows = [
        user("earlier"),
        assistant({"type": "text", "text": "done"}),
        user("list and load"),
        assistant(THINKING, TOOL_USE),
        results("toolu_1"),
        user(status_message_text("greeter", ""), kind="skill_status"),
        user("Base directory for this skill: /x\n\nBODY", kind="skill_prompt", is_meta=True),
    ]
    assert turn_start(rows) == 2
    assert turn_start(rows[:2]) == 0
    assert turn_start([]) is None
    slash = [*rows[:2], user(status_message_text("greeter", "Bo"), kind="skill_status")]
    assert turn_start(slash) == 2


def test_a_failed_turn_is_marked_whole_and_a_retry_sends_it_again_without_its_partial_answer() -> (
    None
):
    rows = [
        user("earlier"),
        assistant({"type": "text", "text": "done"}),
        user("list files"),
        assistant(THINKING, TOOL_USE),
        results("toolu_1"),
        assistant({"type": "text", "text": "There are"}, meta={"partial": True}),
        notice("The model API is overloaded"),
    ]
    changes = exclude_turn(rows, turn_start(rows), "failed")
    assert sorted(changes) == [2, 3, 4, 5]  # the notice needs no mark
    assert changes[2].meta == {EXCLUDED: "failed", EXCLUDED_TURN_START: True}
    assert changes[3].meta == {EXCLUDED: "failed"} and changes[3].content == rows[3].content
    failed = apply(rows, changes)
    assert to_api_messages(failed) == to_api_messages(rows[:2])
    assert unanswered_tool_uses(failed) == []

    again = retry_turn(failed)
    assert sorted(again) == [2, 3, 4]  # not the partial answer: the history ends with the user
    retried = apply(failed, again)
    assert all(EXCLUDED not in r.meta and EXCLUDED_TURN_START not in r.meta for r in retried[:5])
    messages = to_api_messages(retried)
    assert messages[-1]["role"] == "user" and messages[-1]["content"][0]["type"] == "tool_result"
    assert messages[-2]["content"][0] == THINKING


def test_retry_offers_only_the_latest_turn_and_nothing_once_the_user_went_on() -> None:
    rows = [user("one")]
    rows = apply(rows, exclude_turn(rows, 0, "failed"))
    rows += [notice("failed"), user("two")]
    rows = apply(rows, exclude_turn(rows, turn_start(rows), "refusal"))
    assert turn_start(rows) is None  # every user row is excluded
    assert retry_turn(rows) == {2: with_exclusion(rows[2], None)}  # "two", never "one"
    rows += [notice("declined"), user("three"), assistant({"type": "text", "text": "fine"})]
    assert retry_turn(rows) == {}  # a newer turn went on: the old Retry is stale


def test_refused_output_stays_excluded_on_retry() -> None:
    rows = [
        user("question"),
        assistant({"type": "text", "text": "Half an ans"}, meta={"stop_reason": "refusal"}),
    ]
    rows = apply(rows, exclude_turn(rows, 0, "refusal"))
    assert sorted(retry_turn(rows)) == [0]


def test_only_known_exclusion_reasons_are_accepted() -> None:
    with pytest.raises(ValueError, match="Unknown exclusion reason 'oops'"):
        exclude_turn([user("x")], 0, "oops")
    with pytest.raises(ValueError, match="use one of"):
        with_exclusion(user("x"), "oops")


# --- the text of content blocks ---------------------------------------------------------------


def test_text_of_joins_only_text_blocks_and_skips_what_is_not_a_block() -> None:
    blocks = [
        {"type": "text", "text": "one"},
        {"type": "tool_use", "id": "t", "name": "Read", "input": {"text": "not prose"}},
        "stray",
        {"type": "thinking", "thinking": "hmm", "text": "not prose either"},
        {"type": "text", "text": "two"},
    ]
    assert text_of(blocks) == "one\ntwo"
    assert text_of(blocks, sep="") == "onetwo"
    assert text_of([]) == ""


def test_result_text_reads_a_string_or_the_text_blocks_of_a_tool_result() -> None:
    assert result_text(tool_result_block("t", "done")) == "done"
    listed = {"type": "tool_result", "content": [{"type": "text", "text": "a"}, {"type": "image"}]}
    assert result_text(listed) == "a"
    assert result_text({"type": "tool_result"}) == ""
