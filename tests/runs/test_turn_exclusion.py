"""Refused and failed turns, end to end through the real SDK and the fake server: shown as such,
never sent again with later messages, sent again (once) by Retry, and Retry offered only on the
latest failed turn."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from skills_app.audit.transcript_io import export_lines, import_transcript
from skills_app.core.stop_reasons import FAILED_TURN_TEXT, REFUSAL_TEXT
from skills_app.core.transcript import EXCLUDED
from skills_app.models import Conversation, Message, PermissionRule, Run, RunEvent
from skills_app.runs import supervisor as runs
from tests.support.fake_anthropic import REFUSE_DIRECTIVE, Reply
from tests.support.loop_helpers import accepted, rows, run_turn


def export_text(conversation: Conversation, *, include_hidden: bool) -> str:
    return "".join(export_lines(conversation, include_hidden=include_hidden))


pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def conversation(alice):
    return Conversation.objects.create(owner=alice, title="exclusion")


def sent_text(request: dict) -> str:
    return json.dumps(request["messages"], ensure_ascii=False)


async def retry(conversation: Conversation, alice) -> Run:
    run = await runs.start_run(conversation.pk, "ignored", user_id=alice.pk, retry=True)
    await runs.wait_for_run(run.pk, timeout=30)
    return await Run.objects.aget(pk=run.pk)


async def test_a_refused_message_is_shown_declined_and_never_sent_again(fake, conversation, alice):
    fake.enqueue(Reply.text("First answer."), Reply.text("Second answer."))
    await run_turn(conversation, "hello", alice)
    refused = await run_turn(conversation, f"something bad {REFUSE_DIRECTIVE}", alice)
    assert refused.status == Run.DONE
    stored = await sync_to_async(rows)(conversation)
    assert stored[-1].kind == "notice" and stored[-1].content[0]["text"] == REFUSAL_TEXT
    assert stored[-1].meta["code"] == "refusal" and stored[-1].meta["retry"] is True
    refused_row = next(m for m in stored if REFUSE_DIRECTIVE in json.dumps(m.content))
    assert refused_row.meta[EXCLUDED] == "refusal"

    await run_turn(conversation, "a fine question", alice)
    later = accepted(fake)[-1]
    assert REFUSE_DIRECTIVE not in sent_text(later)  # the refusal is not repeated
    assert "hello" in sent_text(later) and "a fine question" in sent_text(later)
    # Positive control: the refused message did reach the server once.
    assert sum(REFUSE_DIRECTIVE in sent_text(r) for r in fake.requests) == 1


async def test_a_failed_turn_is_left_out_and_retry_sends_it_once_without_storing_it_twice(
    fake, conversation, alice
):
    fake.enqueue(Reply.error(429, "rate_limit_error", "slow down"))
    failed = await run_turn(conversation, "count the files", alice)
    assert failed.status == Run.FAILED and failed.error_kind == "rate_limited"
    stored = await sync_to_async(rows)(conversation)
    notice = stored[-1]
    assert notice.kind == "error" and FAILED_TURN_TEXT in notice.content[0]["text"]
    assert "rate-limiting" in notice.content[0]["text"]
    assert stored[0].meta[EXCLUDED] == "failed"
    excluded = await RunEvent.objects.aget(type="turn.excluded")
    assert excluded.data == {"reason": "failed", "message_ids": [stored[0].pk]}
    assert not excluded.hidden

    fake.enqueue(Reply.text("There are three."))
    again = await retry(conversation, alice)
    assert again.status == Run.DONE and again.retry
    assert "count the files" in sent_text(accepted(fake)[-1])
    users = [m async for m in Message.objects.filter(conversation=conversation, role="user")]
    assert [m.content[0]["text"] for m in users] == ["count the files"]  # stored once
    assert EXCLUDED not in users[0].meta

    fake.enqueue(Reply.text("ok"))
    await run_turn(conversation, "thanks", alice)
    assert sent_text(accepted(fake)[-1]).count("count the files") == 1


async def test_a_message_after_a_failure_goes_without_the_failed_turn(fake, conversation, alice):
    fake.enqueue(Reply.error(529, "overloaded_error", "Overloaded"), Reply.text("Fine."))
    await run_turn(conversation, "first try", alice)
    run = await run_turn(conversation, "second message", alice)
    assert run.status == Run.DONE
    messages = accepted(fake)[-1]["messages"]
    assert "first try" not in json.dumps(messages)
    assert [m["role"] for m in messages] == ["user"]


async def test_retry_of_a_superseded_turn_is_refused(fake, conversation, alice):
    fake.enqueue(Reply.error(529, "overloaded_error", "Overloaded"), Reply.text("Fine."))
    await run_turn(conversation, "first try", alice)
    await run_turn(conversation, "went on", alice)
    with pytest.raises(runs.RunError, match="nothing to send again"):
        await runs.start_run(conversation.pk, "first try", user_id=alice.pk, retry=True)
    assert await Run.objects.filter(conversation=conversation).acount() == 2


async def test_retry_of_a_failed_slash_command_does_not_load_the_skill_twice(
    fake, conversation, alice
):
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill(greeter)")
    fake.enqueue(Reply.error(500, "api_error", "boom", headers={"x-should-retry": "false"}))
    await run_turn(conversation, "/greeter Ann", alice)
    fake.enqueue(Reply.text("Hello Ann!"))
    await retry(conversation, alice)
    body = sent_text(accepted(fake)[-1])
    assert body.count("GREETER-BODY-MARKER") == 1
    assert (
        await Message.objects.filter(conversation=conversation, kind="skill_prompt").acount() == 1
    )


async def test_a_failed_turn_of_the_system_prompt_profile_unloads_its_skill(fake, alice):
    """The profile keeps loaded skills in state rows: an excluded turn's load is forgotten."""
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill(greeter)")
    conversation = await Conversation.objects.acreate(owner=alice, profile="system-prompt")
    fake.enqueue(
        Reply.tool_use("skill_load", {"skill": "greeter"}),
        Reply.error(500, "api_error", "boom", headers={"x-should-retry": "false"}),
    )
    await run_turn(conversation, "greet Ann", alice)
    failed = fake.requests[-1]
    assert failed.status == 500 and "GREETER-BODY-MARKER" in failed.system_text  # it was loaded
    fake.enqueue(Reply.text("Hi."))
    await run_turn(conversation, "something else", alice)
    assert "GREETER-BODY-MARKER" not in json.dumps(accepted(fake)[-1]["system"])
    fake.enqueue(Reply.text("Retried."))
    # Retry is stale now; the user went on.
    with pytest.raises(runs.RunError):
        await runs.start_run(conversation.pk, "x", user_id=alice.pk, retry=True)


async def test_retry_restores_a_failed_system_prompt_turn_with_its_skill(fake, alice):
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill(greeter)")
    conversation = await Conversation.objects.acreate(owner=alice, profile="system-prompt")
    fake.enqueue(
        Reply.tool_use("skill_load", {"skill": "greeter"}),
        Reply.error(500, "api_error", "boom", headers={"x-should-retry": "false"}),
        Reply.text("Hello Ann."),
    )
    await run_turn(conversation, "greet Ann", alice)
    run = await retry(conversation, alice)
    assert run.status == Run.DONE
    last = accepted(fake)[-1]
    assert "GREETER-BODY-MARKER" in last.system_text
    assert last["messages"][-1]["content"][0]["type"] == "tool_result"


def page(user, conversation) -> str:
    client = Client()
    client.force_login(user)
    return client.get(f"/c/{conversation.pk}/").content.decode()


async def test_only_the_latest_failed_turn_offers_retry(fake, conversation, alice):
    fake.enqueue(
        Reply.error(529, "overloaded_error", "Overloaded"),
        Reply.error(529, "overloaded_error", "Overloaded"),
    )
    await run_turn(conversation, "one", alice)
    html = await sync_to_async(page)(alice, conversation)
    assert html.count('data-action="retry"') == 1
    await run_turn(conversation, "two", alice)
    html = await sync_to_async(page)(alice, conversation)
    assert html.count('data-action="retry"') == 1
    notices = [m async for m in Message.objects.filter(conversation=conversation, kind="error")]
    retry_at = html.index('data-action="retry"')
    assert html.index(f'id="message-{notices[1].pk}"') < retry_at  # on the second failure
    assert retry_at > html.index(f'id="message-{notices[0].pk}"')
    first_notice = html[html.index(f'id="message-{notices[0].pk}"') :]
    assert 'data-action="retry"' not in first_notice[: first_notice.index("</div>\n</div>")]

    fake.enqueue(Reply.text("fine"))
    await run_turn(conversation, "three", alice)
    assert 'data-action="retry"' not in await sync_to_async(page)(alice, conversation)


async def test_an_excluded_turn_is_exported_as_not_sent_and_stays_out_after_import(
    fake, conversation, alice
):
    fake.enqueue(Reply.text("Hi."))
    await run_turn(conversation, f"bad {REFUSE_DIRECTIVE}", alice)
    await run_turn(conversation, "hello", alice)
    exported = await sync_to_async(export_text)(conversation, include_hidden=False)
    refused = next(json.loads(line) for line in exported.splitlines() if REFUSE_DIRECTIVE in line)
    assert refused["toModel"] is False
    result = await sync_to_async(import_transcript)(alice.pk, exported)
    fake.enqueue(Reply.text("Again."))
    await run_turn(result.conversation, "go on", alice)
    assert REFUSE_DIRECTIVE not in sent_text(accepted(fake)[-1])


async def test_the_exclusion_event_names_no_hidden_row(fake, conversation, alice):
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill(greeter)")
    fake.enqueue(Reply.error(500, "api_error", "boom", headers={"x-should-retry": "false"}))
    await run_turn(conversation, "/greeter Ann", alice)
    hidden = await Message.objects.aget(conversation=conversation, kind="skill_prompt")
    assert hidden.meta[EXCLUDED] == "failed"  # the hidden row is excluded with its turn ...
    event = await RunEvent.objects.aget(type="turn.excluded")
    assert hidden.pk not in event.data["message_ids"]  # ... but never named in the event
    assert event.data["message_ids"]
