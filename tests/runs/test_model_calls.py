"""Every model call is stored with the usage the API reported and its cost: per answer in the
bubble, per conversation in the header, per run / skill / user / model in the audit (page and
CSV). Through the real SDK against the fake server, which reports cache reads like the API."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from skills_app.chat.usage import render_conversation_cost
from skills_app.core.pricing import cost_usd
from skills_app.models import Conversation, Message, ModelCall, PermissionRule, Run
from tests.support.fake_anthropic import FakeAnthropic, Reply
from tests.support.loop_helpers import accepted, run_turn, use_fake_model, write_skills

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fake(settings, tmp_path):
    # No minimum cacheable prefix: the test skills are small, and the cache must show.
    server = FakeAnthropic(cache_minimum=False)
    use_fake_model(settings, server)
    settings.SKILLS_DIRS = [write_skills(tmp_path / "skills")]
    settings.AGENT_HOOKS = {"UserPromptSubmit": [], "PreToolUse": [], "PostToolUse": [], "Stop": []}
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def conversation(alice):
    return Conversation.objects.create(owner=alice, title="costs")


def page(user, path: str) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(path)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


async def test_each_call_is_stored_with_the_usage_the_server_reported_and_its_cost(
    fake, conversation, alice
):
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill(greeter)")
    fake.enqueue(
        Reply.tool_use("Skill", {"skill": "greeter", "args": "Ann"}),
        Reply.text("Hello Ann."),
        Reply.text("You're welcome."),
    )
    first = await run_turn(conversation, "greet Ann", alice)
    await run_turn(conversation, "thanks", alice)

    calls = [c async for c in ModelCall.objects.filter(conversation=conversation).order_by("pk")]
    reported = [r.usage for r in accepted(fake)]
    assert len(calls) == 3
    for call, usage in zip(calls, reported, strict=True):
        assert call.input_tokens == usage["input_tokens"]
        assert call.cache_read_input_tokens == usage["cache_read_input_tokens"]
        assert call.cache_creation_input_tokens == usage["cache_creation_input_tokens"]
        assert call.output_tokens > 0 and call.stop_reason in ("tool_use", "end_turn")
        assert call.cost_usd == cost_usd(call.model, call.usage, on=call.started_at.date())
        assert call.cost_usd > 0 and call.finished_at is not None
    assert [c.call for c in calls] == [1, 2, 1] and calls[0].run_id == first.pk
    assert calls[2].cache_read_input_tokens > 0  # the second turn read the first one's cache
    # The call after the load counts for the skill; the call that decided to load it does not.
    assert [c.skill for c in calls] == ["", "greeter", ""]


async def test_a_failed_call_is_stored_without_usage(fake, conversation, alice, settings):
    settings.ANTHROPIC_MAX_RETRIES = 0
    fake.enqueue(Reply.error(529, "overloaded_error", "Overloaded"))
    await run_turn(conversation, "hi", alice)
    call = await ModelCall.objects.aget(conversation=conversation)
    assert call.error_kind == "overloaded" and call.cost_usd is None
    assert call.finished_at is not None and call.input_tokens == 0


async def test_the_answer_shows_its_tokens_and_cost_and_the_header_the_conversation_total(
    fake, conversation, alice
):
    fake.enqueue(Reply.text("Hi there."), Reply.text("Again."))
    await run_turn(conversation, "hello", alice)
    await run_turn(conversation, "more", alice)
    calls = [c async for c in ModelCall.objects.filter(conversation=conversation)]
    html = await sync_to_async(page)(alice, f"/c/{conversation.pk}/")
    answer = await Message.objects.filter(conversation=conversation, role="assistant").afirst()
    bubble = html[html.index(f'id="message-{answer.pk}"') :]
    detail = bubble[bubble.index('class="usage-detail"') : bubble.index("</span></div>")]
    assert f"{calls[0].input_total:,} input tokens" in detail
    assert f"{calls[0].output_tokens:,} output tokens" in detail
    assert f"${calls[0].cost_usd.quantize(Decimal('0.0001'))}" in detail
    assert "Claude Opus 4.8" in detail
    total = sum(c.cost_usd for c in calls)
    pushed = await sync_to_async(render_conversation_cost)(conversation.pk)
    assert pushed.strip() in html  # the same partial, for a live swap when a run finishes
    header = html[html.index('id="conversation-cost"') :]
    assert header.startswith(
        f'id="conversation-cost" title="Every model call of this conversation">${total.quantize(Decimal("0.0001"))}'
    )


async def test_the_demo_model_says_no_cost(settings, conversation, alice):
    settings.MODEL_CLIENT = "tests.support.loop_helpers.instant_demo_client"
    settings.SKILLS_DIRS = []
    run = await run_turn(conversation, "hello", alice)
    assert run.is_demo
    call = await ModelCall.objects.aget(conversation=conversation)
    assert call.is_demo and call.model == "demo" and call.cost_usd is None
    html = await sync_to_async(page)(alice, f"/c/{conversation.pk}/")
    assert '<span class="usage-summary">no cost</span>' in html
    assert 'id="conversation-cost" title="Every model call of this conversation">no cost' in html


# -- the audit --------------------------------------------------------------------------------


@pytest.fixture
def two_users_calls(fake, alice, bob):
    """Alice loads greeter (2 calls), Bob asks once on claude-haiku-4-5."""

    async def drive():
        await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill(greeter)")
        mine = await Conversation.objects.acreate(owner=alice, title="mine")
        fake.enqueue(Reply.tool_use("Skill", {"skill": "greeter"}), Reply.text("Hello."))
        await run_turn(mine, "greet", alice)
        theirs = await Conversation.objects.acreate(
            owner=bob, title="bob's", model="claude-haiku-4-5"
        )
        fake.enqueue(Reply.text("Hi Bob."))
        await run_turn(theirs, "hi", bob)
        return mine, theirs

    return drive


def staff_get(user, **params) -> tuple[int, str]:
    client = Client()
    client.force_login(user)
    response = client.get("/audit/costs/", params)
    return response.status_code, response.content.decode()


async def test_costs_are_for_staff_only(two_users_calls, alice, bob):
    await two_users_calls()
    status, _ = await sync_to_async(staff_get)(alice)
    assert status == 403
    anonymous = await sync_to_async(Client().get)("/audit/costs/")
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]


async def test_costs_per_user_model_skill_and_run_add_up(two_users_calls, auditor):
    await two_users_calls()
    calls = [c async for c in ModelCall.objects.select_related("conversation__owner")]
    by_user: dict[str, Decimal] = {}
    for call in calls:
        owner = call.conversation.owner.username
        by_user[owner] = by_user.get(owner, Decimal(0)) + call.cost_usd
    status, html = await sync_to_async(staff_get)(auditor, group="user")
    assert status == 200
    for user, amount in by_user.items():
        row = html[html.index(f'<tr data-key="{user}">') :]
        assert f"${amount.quantize(Decimal('0.0001'))}" in row[: row.index("</tr>")]

    _, html = await sync_to_async(staff_get)(auditor, group="model")
    assert '<tr data-key="claude-haiku-4-5">' in html and '<tr data-key="claude-opus-4-8">' in html

    _, html = await sync_to_async(staff_get)(auditor, group="skill")
    greeter = html[html.index('<tr data-key="greeter">') :]
    greeter_cost = sum(c.cost_usd for c in calls if c.skill == "greeter")
    assert f"${greeter_cost.quantize(Decimal('0.0001'))}" in greeter[: greeter.index("</tr>")]
    assert "(no skill loaded)" in html

    _, html = await sync_to_async(staff_get)(auditor, group="run")
    runs = [r async for r in Run.objects.all()]
    assert all(f'<tr data-key="#{r.pk}">' in html for r in runs)


async def test_costs_export_as_csv_without_spreadsheet_formulas(
    two_users_calls, auditor, django_user_model
):
    mine, _theirs = await two_users_calls()
    # A username a spreadsheet would run as a formula (Django allows a leading "@", "+" or "-").
    carol = await sync_to_async(django_user_model.objects.create_user)("@SUM(1+1)", password="x")
    hers = await Conversation.objects.acreate(owner=carol, title="carol's")
    await ModelCall.objects.acreate(
        conversation=hers,
        requested_model="claude-opus-4-8",
        model="claude-opus-4-8",
        input_tokens=10,
        output_tokens=5,
        cost_usd=Decimal("0.000175"),
    )
    client = Client()
    await sync_to_async(client.force_login)(auditor)
    response = await sync_to_async(client.get)("/audit/costs/", {"group": "user", "format": "csv"})
    assert response["Content-Type"].startswith("text/csv")
    lines = list(csv.reader(io.StringIO(response.content.decode())))
    assert lines[0][:3] == ["user", "detail", "calls"]
    carol_row = next(line for line in lines if "SUM" in line[0])
    assert carol_row[:7] == ["'@SUM(1+1)", "", "1", "10", "0", "0", "5"]
    assert Decimal(carol_row[7]) == Decimal("0.000175") and carol_row[8] == "$0.0002"
    assert not any(cell.startswith(("=", "@", "+")) for line in lines for cell in line)
    alice_row = next(line for line in lines if line[0] == "alice")
    total = sum([c.cost_usd async for c in ModelCall.objects.filter(conversation=mine)])
    assert Decimal(alice_row[7]) == total


async def test_the_period_filter_leaves_out_older_calls(two_users_calls, auditor):
    await two_users_calls()
    _, html = await sync_to_async(staff_get)(auditor, group="user", until="2000-01-01")
    assert "No model calls in this period." in html
