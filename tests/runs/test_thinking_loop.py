"""A thinking model through today's agent loop: its thinking blocks are stored with their
signature and sent back unchanged, so the fake server (like the API) accepts the tool loop."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from skills_app.models import Conversation, Run
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import accepted, rows, run_turn, use_fake_model, watch_group

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("model", ["claude-sonnet-5", "claude-fable-5"])
async def test_a_tool_loop_of_a_thinking_model_round_trips_its_thinking(
    settings, fake_anthropic, alice, model
):
    use_fake_model(settings, fake_anthropic)
    settings.ANTHROPIC_MODEL = model  # both think when `thinking` is omitted
    conversation = await Conversation.objects.acreate(owner=alice, title="t")
    fake_anthropic.enqueue(
        Reply.tool_use("Glob", {"pattern": "*"}, text="Looking."), Reply.text("Nothing there.")
    )
    run = await run_turn(conversation, "what files are there?", alice)

    assert run.status == Run.DONE, run.error
    first, second = accepted(fake_anthropic)
    assert (first["model"], second["model"]) == (model, model)
    stored = await sync_to_async(rows)(conversation)
    tool_call = next(m for m in stored if m.kind == "tool_use")
    thinking = tool_call.content[0]
    assert thinking["type"] == "thinking" and thinking["signature"].startswith("sig_")
    assert second["messages"][1]["content"][0] == thinking  # sent back exactly as stored
    assert stored[-1].content[0]["type"] == "thinking"  # the final answer keeps its own too


async def test_a_changed_thinking_block_would_be_refused(settings, fake_anthropic, alice):
    """Positive control: the server really checks what the loop sends back."""
    use_fake_model(settings, fake_anthropic)
    settings.ANTHROPIC_MODEL = "claude-sonnet-5"
    conversation = await Conversation.objects.acreate(owner=alice, title="t")
    fake_anthropic.enqueue(Reply.tool_use("Glob", {"pattern": "*"}), Reply.text("done"))
    await run_turn(conversation, "look", alice)
    tool_call = next(m for m in await sync_to_async(rows)(conversation) if m.kind == "tool_use")
    tool_call.content[0]["thinking"] = "something else"
    await tool_call.asave(update_fields=["content"])
    # Continue the same loop from the stored rows: the altered block is rejected.
    last = await conversation.messages.order_by("-seq").afirst()
    # Keep the final answer from the model (rows are never deleted) so the history ends with the
    # tool result.
    await conversation.messages.filter(pk=last.pk).aupdate(to_model=False)
    run = await run_turn(conversation, None, alice)
    assert run.status == Run.FAILED
    assert "Invalid `signature` in `thinking` block" in run.error


async def test_summarized_thinking_streams_as_thinking_delta_events(
    settings, fake_anthropic, alice
):
    use_fake_model(settings, fake_anthropic)
    settings.ANTHROPIC_THINKING = True  # adaptive thinking, display "summarized"
    conversation = await Conversation.objects.acreate(owner=alice, title="t")
    fake_anthropic.enqueue(Reply.text("The answer."))
    async with watch_group(conversation.pk) as seen:
        run = await run_turn(conversation, "think about it", alice)

    assert run.status == Run.DONE, run.error
    assert accepted(fake_anthropic)[0]["thinking"]["display"] == "summarized"
    # Live to the conversation's tabs (not stored one by one: the row holds the whole text).
    streamed = [m["event"]["text"] for m in seen if m["type"] == "thinking.delta"]
    stored = await sync_to_async(rows)(conversation)
    thinking = stored[-1].content[0]
    assert thinking["type"] == "thinking" and thinking["thinking"]
    assert "".join(streamed) == thinking["thinking"]
