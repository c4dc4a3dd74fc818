"""Budgets at every entrance that calls the model: chat (to its limit mid-run), forks, titles,
summaries, trigger runs, the comparison page. Attack first: each test drives an ordinary user
into a limit and checks the API got no call past it, the history stays valid and the person is
told in plain words.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from skills_app.chat import summaries, titles
from skills_app.core.admission import CallRefused
from skills_app.core.llm import ModelRequest
from skills_app.models import (
    Comparison,
    Conversation,
    ModelCall,
    PermissionRule,
    Run,
    SpendCounter,
    SpendReservation,
    TriggerRun,
)
from skills_app.policy import budgets
from skills_app.policy.access import policy_for
from skills_app.policy.limits import LimitReached, check_send
from skills_app.runs import agent_setup as store
from skills_app.runs.spending import Spending
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import (
    accepted,
    rows,
    run_turn,
    use_fake_model,
    wait_until,
    write_skills,
)
from tests.support.org import group, user_limits

pytestmark = pytest.mark.django_db(transaction=True)

HAIKU = "claude-haiku-4-5"
FORKER = {
    "forker": """\
        ---
        name: forker
        description: Looks into things as a subagent.
        context: fork
        ---
        FORK-BODY: look around and answer.
        """
}


@pytest.fixture
def setup(settings, fake_anthropic, tmp_path):
    use_fake_model(settings, fake_anthropic)
    settings.ANTHROPIC_MAX_TOKENS = 2000  # a call's ceiling: 2,000 output tokens at $5/MTok
    settings.SKILLS_DIRS = [write_skills(tmp_path / "skills", FORKER)]
    PermissionRule.objects.create(behavior="allow", rule_text="Skill")
    PermissionRule.objects.create(behavior="allow", rule_text="Glob")
    return fake_anthropic


@pytest.fixture
def conversation(alice):
    return Conversation.objects.create(owner=alice, title="t", model=HAIKU)


def day_counter(scope: str, scope_id: int) -> SpendCounter:
    return SpendCounter.objects.get(scope=scope, scope_id=scope_id, period=SpendCounter.DAY)


async def test_a_run_that_reaches_the_limit_mid_way_ends_cleanly(setup, conversation, alice):
    # $0.03: the first call fits (its ceiling, the prompt's UTF-8 bytes at the cache-write price
    # and 2,000 output tokens, is about $0.021), its answer costs about $0.018, so the second
    # call's ceiling no longer fits in the $0.012 left.
    await sync_to_async(user_limits)(alice, daily="0.03")
    setup.enqueue(Reply.tool_use("Glob", {"pattern": "*"}, output_tokens=3000))
    run = await run_turn(conversation, "look around", alice)
    assert run.status == Run.FAILED and run.error_kind == "budget"
    assert len(accepted(setup)) == 1  # the second call was never sent
    stored = await sync_to_async(rows)(conversation)
    assert [m.kind for m in stored] == ["text", "tool_use", "tool_result", "error"]
    notice = stored[-1].content[0]["text"]
    assert "Your daily spending limit of $0.03 has $0.01 left today" in notice
    assert "the next model call could cost up to $0.03" in notice
    assert "resets at midnight" in notice and "administrator can raise it" in notice
    # Settled: what the call cost is spent, nothing stays reserved.
    counter = await sync_to_async(day_counter)(SpendCounter.USER, alice.pk)
    call = await ModelCall.objects.aget()
    assert counter.spent_usd == call.cost_usd and counter.reserved_usd == 0
    # The history is valid: after an administrator raises the limit, the next message is sent
    # and accepted by the (strict) fake API, the tool result included.
    await sync_to_async(user_limits)(alice, daily="5")
    setup.enqueue(Reply.text("continuing"))
    run = await run_turn(conversation, "go on", alice)
    assert run.status == Run.DONE
    last = accepted(setup)[-1]
    assert last["messages"][-1]["content"][0]["type"] == "tool_result"


async def test_a_reached_limit_refuses_a_new_message_before_it_is_stored(setup, alice):
    await sync_to_async(user_limits)(alice, daily="0")
    with pytest.raises(LimitReached, match=r"daily spending limit of \$0.00 is reached"):
        await sync_to_async(check_send)(alice.pk)


async def test_a_group_limit_counts_every_member_together(setup, alice, bob):
    team = await sync_to_async(group)("team", daily="0.03")
    await sync_to_async(alice.groups.add)(team)
    await sync_to_async(bob.groups.add)(team)
    mine = await Conversation.objects.acreate(owner=alice, model=HAIKU)
    setup.enqueue(Reply.text("expensive", output_tokens=3000))
    await run_turn(mine, "hi", alice)
    theirs = await Conversation.objects.acreate(owner=bob, model=HAIKU)
    run = await run_turn(theirs, "hi", bob)
    assert run.status == Run.FAILED and run.error_kind == "budget"
    notice = (await sync_to_async(rows)(theirs))[-1].content[0]["text"]
    assert "your group team" in notice
    assert len(accepted(setup)) == 1


async def test_a_forked_subagent_is_charged_and_stopped_by_the_same_budget(
    setup, conversation, alice
):
    # The parent's first call and the subagent's hold about $0.021 each and fit in $0.05; each
    # costs about $0.017, so neither the subagent's second call nor the parent's next one (about
    # $0.022 each) fits in what is left.
    await sync_to_async(user_limits)(alice, daily="0.05")

    def respond(request):
        if "FORK-BODY" in str(request["messages"][0]):
            return Reply.tool_use("Glob", {"pattern": "*"}, output_tokens=3000)
        return Reply.tool_use("Skill", {"skill": "forker"}, output_tokens=3000)

    setup.set_responder(respond)
    run = await run_turn(conversation, "fork", alice)
    assert run.status == Run.FAILED and run.error_kind == "budget"
    # The parent's first call and the subagent's first call; nothing after the limit.
    assert len(accepted(setup)) == 2
    child = await Run.objects.aget(parent=run)
    assert child.status == Run.FAILED and "spending limit" in child.error
    purposes = [p async for p in SpendReservation.objects.values_list("purpose", flat=True)]
    assert sorted(purposes) == ["fork", "turn"]


async def test_a_title_over_budget_is_made_without_the_model(setup, conversation, alice, settings):
    setup.enqueue(Reply.text("An answer", output_tokens=3000))
    await run_turn(conversation, "Plan the offsite in Lisbon", alice)

    async def titled():
        return (await Conversation.objects.aget(pk=conversation.pk)).title != "New conversation"

    await wait_until(titled, what="the automatic title (made without a title model)")
    await Conversation.objects.filter(pk=conversation.pk).aupdate(title="New conversation")
    settings.CHAT_TITLE_MODEL = HAIKU
    await sync_to_async(user_limits)(alice, daily="0.01")  # less than already spent
    before = len(setup.requests)
    await titles.title_after_answer(conversation.pk)
    assert len(setup.requests) == before  # no title request: the budget is spent
    title = (await Conversation.objects.aget(pk=conversation.pk)).title
    assert "offsite" in title.lower()


async def test_a_summary_over_budget_says_why_and_calls_nothing(setup, conversation, alice):
    setup.enqueue(Reply.text("first answer", output_tokens=3000))
    await run_turn(conversation, "hello", alice)
    await sync_to_async(user_limits)(alice, daily="0.02")
    before = len(setup.requests)
    with pytest.raises(summaries.SummaryError, match="spending limit"):
        await summaries.continue_with_summary(conversation)
    assert len(setup.requests) == before
    # Once less is left than was spent, the page refuses before trying at all.
    await sync_to_async(user_limits)(alice, daily="0.01")
    with pytest.raises(LimitReached, match="spending limit"):
        await sync_to_async(summaries.check_summary_limit)(alice.pk)


async def test_the_comparison_page_counts_its_three_runs_against_the_limits(
    setup, auditor, settings
):
    settings.RATE_LIMIT_CONCURRENT_RUNS = 2
    client = AsyncClient()
    await sync_to_async(client.force_login)(auditor)
    response = await client.post("/compare/start/", {"prompt": "hi", "skills": ["forker"]})
    assert response.status_code == 429
    assert "answers in progress" in response.content.decode()
    assert await Comparison.objects.acount() == 0
    settings.RATE_LIMIT_CONCURRENT_RUNS = 3
    await sync_to_async(user_limits)(auditor, daily="0")
    response = await client.post("/compare/start/", {"prompt": "hi", "skills": ["forker"]})
    assert response.status_code == 429 and "spending limit" in response.content.decode()
    assert accepted(setup) == []


async def test_eight_compare_posts_start_at_most_the_allowed_runs(setup, auditor, settings):
    """The report: 8 posts started 24 runs in 8.6 s. Now the sending limits hold."""
    settings.RATE_LIMIT_MESSAGES_PER_MINUTE = 20
    setup.set_responder(lambda request: Reply.text("ok"))
    client = AsyncClient()
    await sync_to_async(client.force_login)(auditor)
    codes = []
    for _ in range(8):
        response = await client.post("/compare/start/", {"prompt": "hi", "skills": ["forker"]})
        codes.append(response.status_code)
        for run in [r async for r in Run.objects.filter(status__in=Run.ACTIVE)]:
            from skills_app.runs import supervisor

            await supervisor.wait_for_run(run.pk, timeout=30)
    started = await Run.objects.acount()
    assert started <= 20 and started % 3 == 0
    assert codes.count(429) >= 2


def test_reservations_left_by_a_dead_process_are_charged_after_the_ttl(alice, settings):
    settings.BUDGET_RESERVATION_TTL = 60
    user_limits(alice, daily="1")
    policy = policy_for(alice.pk)
    held = budgets.reserve(policy, model=HAIKU, amount=Decimal("0.40"), purpose="turn")
    SpendReservation.objects.filter(pk=held.id).update(
        created_at=SpendReservation.objects.get(pk=held.id).created_at.replace(year=2000)
    )
    assert budgets.sweep_stale() == 1
    counter = day_counter(SpendCounter.USER, alice.pk)
    assert counter.reserved_usd == 0 and counter.spent_usd == Decimal("0.40")
    budgets.settle(held, Decimal("0.01"))  # a late settle changes nothing: it is idempotent
    assert day_counter(SpendCounter.USER, alice.pk).spent_usd == Decimal("0.40")


def test_what_is_left_is_told_per_limit(alice):
    user_limits(alice, daily="2", monthly="10")
    policy = policy_for(alice.pk)
    held = budgets.reserve(policy, model=HAIKU, amount=Decimal("0.50"), purpose="turn")
    budgets.settle(held, Decimal("0.25"))
    standing = {(s.limit.scope, s.period): s for s in budgets.standings(policy)}
    assert standing[(SpendCounter.USER, SpendCounter.DAY)].left == Decimal("1.75")
    assert standing[(SpendCounter.USER, SpendCounter.MONTH)].left == Decimal("9.75")


async def test_a_stored_history_after_a_refusal_rebuilds_a_valid_request(
    setup, conversation, alice
):
    await sync_to_async(user_limits)(alice, daily="0.03")
    setup.enqueue(Reply.tool_use("Glob", {"pattern": "*"}, output_tokens=3000))
    await run_turn(conversation, "look", alice)
    request = await sync_to_async(store.build_request)(conversation)
    roles = [m["role"] for m in request.messages]
    assert roles == ["user", "assistant", "user"]  # every tool_use answered


async def test_trigger_run_estimates_are_checked_before_the_run_starts(
    setup, skill_manager, tmp_path, settings
):
    from tests.support.trigger_helpers import give_cases, install_org_skills, isolate_skills
    from tests.triggers.test_trigger_runs import client_for, start  # noqa: F401

    isolate_skills(settings, tmp_path)
    settings.RUN_EXECUTOR = "inline"
    packages = await sync_to_async(install_org_skills)(tmp_path, skill_manager)
    await sync_to_async(give_cases)(packages["pdf-tables"])
    await sync_to_async(user_limits)(skill_manager, daily="0.0001")
    client = await client_for(skill_manager)
    package = packages["pdf-tables"]
    response = await client.post(
        f"/skills/triggers/packages/{package.pk}/runs/",
        {
            "version": package.active_version_id,
            "model": settings.ANTHROPIC_MODEL,
            "profile": "meta-message",
            "repetitions": 10,
        },
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert "This run is estimated at" in page and "Lower the repetitions" in page
    assert await TriggerRun.objects.acount() == 0 and accepted(setup) == []


async def test_a_trigger_run_that_reaches_the_limit_stops_and_keeps_its_answers(
    setup, skill_manager, tmp_path, settings
):
    from tests.support.fake_anthropic_choice import skill_chooser
    from tests.support.trigger_helpers import (
        give_cases,
        install_org_skills,
        isolate_skills,
        wait_for_trigger_run,
    )
    from tests.triggers.test_trigger_runs import client_for

    isolate_skills(settings, tmp_path)
    settings.RUN_EXECUTOR = "inline"
    settings.TRIGGER_CONCURRENCY = 2
    setup.set_responder(skill_chooser())
    packages = await sync_to_async(install_org_skills)(tmp_path, skill_manager)
    await sync_to_async(give_cases)(packages["pdf-tables"])
    # The estimate (prompts only) fits; two attempts' ceilings at once ($0.05 of output each on
    # Opus) do not.
    await sync_to_async(user_limits)(skill_manager, daily="0.10")
    client = await client_for(skill_manager)
    package = packages["pdf-tables"]
    response = await client.post(
        f"/skills/triggers/packages/{package.pk}/runs/",
        {
            "version": package.active_version_id,
            "model": settings.ANTHROPIC_MODEL,
            "profile": "meta-message",
            "repetitions": 2,
        },
    )
    assert response.status_code == 302, response.content.decode()[:1500]
    run = await TriggerRun.objects.aget()
    run = await wait_for_trigger_run(run.pk)
    assert run.status == TriggerRun.FAILED
    assert run.error.startswith("Stopped: your daily spending limit of $0.10 is reached")
    assert 0 < run.attempts_done < run.attempts_total
    assert len(accepted(setup)) == run.attempts_done
    counter = await sync_to_async(day_counter)(SpendCounter.USER, skill_manager.pk)
    assert counter.reserved_usd == 0 and counter.spent_usd <= Decimal("0.10")
    assert counter.spent_usd == run.cost_usd


async def test_calls_in_flight_at_once_keep_their_room_reserved(alice):
    """Trigger runs send attempts in parallel from one Spending: taking room for the second
    call must not give back the room of the first, still unanswered."""
    await sync_to_async(user_limits)(alice, daily="0.08")
    policy = await sync_to_async(policy_for)(alice.pk)
    spending = Spending(policy, "trigger")
    request = ModelRequest(
        model=HAIKU,
        system="",
        tools=[],
        messages=[{"role": "user", "content": "hi"}],
        max_tokens=10_000,
    )
    ceiling = spending.ceiling(request)
    assert Decimal("0.05") < ceiling < Decimal("0.051")  # 10,000 output tokens at $5/MTok
    first = await spending.admit(request)
    with pytest.raises(CallRefused, match=r"has \$0.02 left today"):
        await spending.admit(request)  # two such calls at once could cost $0.10
    counter = await sync_to_async(day_counter)(SpendCounter.USER, alice.pk)
    assert counter.reserved_usd == ceiling  # the first call's room is still held
    answer = {"model": HAIKU, "usage": {"input_tokens": 10, "output_tokens": 10_000}}
    await spending.settle(first, message=answer)
    await spending.close()
    counter = await sync_to_async(day_counter)(SpendCounter.USER, alice.pk)
    assert counter.reserved_usd == 0 and counter.spent_usd == Decimal("0.05001")


async def test_calls_in_flight_at_once_share_a_lease_that_holds_them(alice):
    await sync_to_async(user_limits)(alice, daily="1")
    policy = await sync_to_async(policy_for)(alice.pk)
    spending = Spending(policy, "trigger")
    request = ModelRequest(
        model=HAIKU,
        system="",
        tools=[],
        messages=[{"role": "user", "content": "hi"}],
        max_tokens=100,
    )
    tickets = [await spending.admit(request) for _ in range(6)]  # more than one lease holds
    counter = await sync_to_async(day_counter)(SpendCounter.USER, alice.pk)
    assert counter.reserved_usd >= spending.ceiling(request) * 6
    answer = {"model": HAIKU, "usage": {"input_tokens": 10, "output_tokens": 100}}
    for ticket in tickets:
        await spending.settle(ticket, message=answer)
    await spending.close()
    counter = await sync_to_async(day_counter)(SpendCounter.USER, alice.pk)
    assert counter.reserved_usd == 0 and counter.spent_usd == Decimal("0.00051") * 6
