"""Model-side faults, end to end: the real SDK against the fake server, through runs and the store.

Already covered in test_agent_loop.py (529, 500, cut mid-text, cut mid tool_use JSON, no
message_stop, 429 then success) and, at the adapter level only, in test_llm.py. Here: the rest of
issue 7's list. Every case checks the same four things: the user's message is stored (nothing
lost), partial text is kept and marked, no stored tool_use lacks its tool_result, and the history
rebuilt from the rows is one the API accepts (so the next turn works).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from skills_app.models import Conversation, Message, PermissionRule, Run
from skills_app.runs import agent_setup
from tests.browser.live_server import free_port
from tests.support.fake_anthropic import Reply, tool_use_block, validate_request
from tests.support.loop_helpers import rows, run_turn, use_fake_model

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fake(settings, fake_anthropic):
    use_fake_model(settings, fake_anthropic)
    settings.SKILLS_DIRS = []
    settings.AGENT_HOOKS = {"UserPromptSubmit": [], "PreToolUse": [], "PostToolUse": [], "Stop": []}
    return fake_anthropic


@pytest.fixture
def conversation(alice):
    return Conversation.objects.create(owner=alice, title="faults")


def orphan_tool_uses(stored: list[Message]) -> list[str]:
    """Ids of stored tool_use blocks not answered by a tool_result in the next model-bound row."""
    bound = [m for m in stored if m.to_model]
    orphans: list[str] = []
    for i, row in enumerate(bound):
        ids = [b["id"] for b in row.content if b.get("type") == "tool_use"]
        if not ids:
            continue
        answered: set[str] = set()
        for later in bound[i + 1 :]:
            if later.role == "assistant":
                break
            answered |= {b.get("tool_use_id") for b in later.content}
        orphans += [i for i in ids if i not in answered]
    return orphans


def history_problem(conversation: Conversation) -> str | None:
    """Why the next request (stored rows + a new user message) would be rejected, or None."""
    request = agent_setup.build_request(conversation).as_kwargs()
    request["messages"] = [*request["messages"], {"role": "user", "content": "next"}]
    # Merge when the stored history already ends with a user turn, as the loop would.
    merged: list[dict[str, Any]] = []
    for message in request["messages"]:
        if merged and merged[-1]["role"] == message["role"] == "user":
            previous = merged[-1]["content"]
            previous = (
                [{"type": "text", "text": previous}] if isinstance(previous, str) else previous
            )
            current = message["content"]
            current = [{"type": "text", "text": current}] if isinstance(current, str) else current
            merged[-1] = {"role": "user", "content": [*previous, *current]}
        else:
            merged.append(message)
    request["messages"] = merged
    return validate_request(request)


async def assert_intact(conversation: Conversation, user_text: str) -> list[Message]:
    """The four invariants; returns the stored rows for case-specific checks."""
    stored = await sync_to_async(rows)(conversation)
    user_rows = [m for m in stored if m.role == "user" and m.kind == "text"]
    assert user_rows and user_rows[0].content == [{"type": "text", "text": user_text}]
    assert orphan_tool_uses(stored) == []
    assert await sync_to_async(history_problem)(conversation) is None
    return stored


async def assert_next_turn_works(fake, conversation, alice) -> None:
    fake.enqueue(Reply.text("back to normal"))
    run = await run_turn(conversation, "and now?", alice)
    assert run.status == Run.DONE
    assert fake.requests[-1].status == 200


async def test_a_refused_connection_fails_readably_after_retries(
    settings, fake, conversation, alice
):
    settings.ANTHROPIC_BASE_URL = f"http://127.0.0.1:{free_port()}"
    settings.ANTHROPIC_MAX_RETRIES = 1
    run = await run_turn(conversation, "anyone there?", alice)
    assert run.status == Run.FAILED and run.error_kind == "connection"
    assert "Could not reach the model API" in run.error and "ANTHROPIC_BASE_URL" in run.error
    stored = await assert_intact(conversation, "anyone there?")
    assert stored[-1].kind == "error" and stored[-1].to_model is False
    assert "Could not reach" in stored[-1].content[0]["text"]
    settings.ANTHROPIC_BASE_URL = fake.base_url
    await assert_next_turn_works(fake, conversation, alice)


async def test_a_refusal_keeps_the_text_and_says_the_model_declined(fake, conversation, alice):
    fake.enqueue(Reply.text("I can't help with that", stop_reason="refusal"))
    run = await run_turn(conversation, "do something bad", alice)
    assert run.status == Run.DONE
    stored = await assert_intact(conversation, "do something bad")
    answer = [m for m in stored if m.role == "assistant" and m.kind == "text"]
    assert answer[-1].content == [{"type": "text", "text": "I can't help with that"}]
    assert answer[-1].meta["stop_reason"] == "refusal"
    assert stored[-1].kind == "notice" and stored[-1].to_model is False
    assert "declined" in stored[-1].content[0]["text"]
    await assert_next_turn_works(fake, conversation, alice)


async def test_invalid_json_in_tool_input_runs_nothing_and_keeps_the_text(
    fake, conversation, alice, tmp_path
):
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Bash")
    fake.enqueue(Reply.tool_use("Bash", text="Running it now.", raw_json='{"command": touch x}'))
    run = await run_turn(conversation, "make a file", alice)
    assert run.status == Run.FAILED and run.error_kind == "invalid_tool_json"
    assert "not valid JSON" in run.error
    stored = await assert_intact(conversation, "make a file")
    partial = [m for m in stored if m.role == "assistant" and m.meta.get("partial")]
    assert [p.content for p in partial] == [[{"type": "text", "text": "Running it now."}]]
    assert not any(b.get("type") == "tool_use" for m in stored for b in m.content)
    assert stored[-1].kind == "error" and stored[-1].to_model is False
    assert len(fake.requests) == 1  # nothing was run, so nothing was sent back
    await assert_next_turn_works(fake, conversation, alice)


async def test_a_max_tokens_stop_inside_a_tool_use_drops_the_call_and_keeps_the_text(
    fake, conversation, alice
):
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Bash")
    fake.enqueue(
        Reply.blocks(
            [
                {"type": "text", "text": "Writing the long script."},
                tool_use_block("Bash", raw_json='{"command": "echo aaaaaaaa'),
            ],
            stop_reason="max_tokens",
        )
    )
    run = await run_turn(conversation, "write a script", alice)
    assert run.status in (Run.DONE, Run.FAILED)
    stored = await assert_intact(conversation, "write a script")
    texts = [
        b["text"]
        for m in stored
        if m.role == "assistant" and m.to_model
        for b in m.content
        if b.get("type") == "text"
    ]
    assert texts == ["Writing the long script."]
    assert not any(b.get("type") == "tool_use" for m in stored for b in m.content)
    last = stored[-1]
    assert last.kind in ("notice", "error") and last.to_model is False
    assert last.content[0]["text"].strip()
    assert len(fake.requests) == 1
    await assert_next_turn_works(fake, conversation, alice)


async def test_a_complete_tool_use_cut_by_max_tokens_is_not_run(fake, conversation, alice):
    # Valid JSON but the API said the output was cut: the call may be incomplete, so it is dropped.
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Bash")
    fake.enqueue(
        Reply.blocks(
            [{"type": "text", "text": "Almost."}, tool_use_block("Bash", {"command": "echo hi"})],
            stop_reason="max_tokens",
        )
    )
    run = await run_turn(conversation, "go", alice)
    assert run.status == Run.DONE
    stored = await assert_intact(conversation, "go")
    assert not any(b.get("type") == "tool_use" for m in stored for b in m.content)
    notice = stored[-1].content[0]["text"]
    assert stored[-1].kind == "notice" and "output limit of 8,192 tokens" in notice
    await assert_next_turn_works(fake, conversation, alice)


async def test_429_until_retries_run_out_is_a_readable_error(fake, conversation, alice):
    fake.enqueue(*[Reply.error(429, "rate_limit_error", "slow down")] * 3)
    run = await run_turn(conversation, "hello?", alice)
    assert [r.status for r in fake.requests] == [429, 429, 429]  # 1 try + 2 retries
    assert run.status == Run.FAILED and run.error_kind == "rate_limited"
    assert "rate-limiting" in run.error and "Traceback" not in run.error
    stored = await assert_intact(conversation, "hello?")
    assert stored[-1].kind == "error" and "rate-limiting" in stored[-1].content[0]["text"]
    await assert_next_turn_works(fake, conversation, alice)


async def test_a_429_retry_after_header_is_honoured(fake, conversation, alice):
    fake.enqueue(
        Reply.error(429, "rate_limit_error", "slow down", headers={"retry-after-ms": "600"}),
        Reply.text("done waiting"),
    )
    started = time.monotonic()
    run = await run_turn(conversation, "hi", alice)
    assert run.status == Run.DONE
    assert time.monotonic() - started >= 0.6
    assert [r.status for r in fake.requests] == [429, 200]


async def test_an_error_event_mid_stream_keeps_the_partial_text_marked(fake, conversation, alice):
    fake.enqueue(Reply.text("First half of the answer, then", chunk=6, error_event_after=6))
    run = await run_turn(conversation, "tell me", alice)
    assert run.status == Run.FAILED and run.error_kind == "overloaded"
    stored = await assert_intact(conversation, "tell me")
    partial = [m for m in stored if m.meta.get("partial")]
    assert len(partial) == 1 and partial[0].to_model
    assert "First half of the answer, then".startswith(partial[0].content[0]["text"])
    assert partial[0].content[0]["text"]
    assert stored[-1].kind == "error"
    await assert_next_turn_works(fake, conversation, alice)


async def test_a_fault_after_a_tool_round_keeps_the_tool_exchange(fake, conversation, alice):
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Glob")
    fake.enqueue(
        Reply.tool_use("Glob", {"pattern": "*"}, text="Looking."),
        Reply.text("Found these files and", chunk=4, cut_after_events=5),
    )
    run = await run_turn(conversation, "list files", alice)
    assert run.status == Run.FAILED and run.error_kind == "stream_cut"
    stored = await assert_intact(conversation, "list files")
    kinds = [(m.role, m.kind) for m in stored]
    assert ("assistant", "tool_use") in kinds and ("user", "tool_result") in kinds
    assert any(m.meta.get("partial") for m in stored)
    await assert_next_turn_works(fake, conversation, alice)
