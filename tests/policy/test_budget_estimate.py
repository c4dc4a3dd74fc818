"""A prompt the tokenizer splits finer than characters / 4 cannot walk past a budget.

The report: 15,500 emoji cost about 13 times characters / 4; under a $0.50 daily cap two parallel
runs spent $0.584. The fake server here counts tokens at a tokenizer's worst (one per UTF-8 byte
outside ASCII), so what it reports is what the real API could bill.
"""

from __future__ import annotations

import re
import threading
from decimal import Decimal

import pytest
from asgiref.sync import sync_to_async

from skills_app.models import Conversation, ModelCall, Run, SpendCounter
from skills_app.runs import supervisor as runs
from tests.support.fake_anthropic import TEST_MODEL, Reply
from tests.support.fake_anthropic_cache import worst_case_tokens
from tests.support.loop_helpers import accepted, rows, use_fake_model, wait_until
from tests.support.org import user_limits

pytestmark = pytest.mark.django_db(transaction=True)

EMOJI = "\N{GRINNING FACE}" * 15_500
# Another prompt for the second run, so it cannot read the first one's prompt from the cache.
OTHER_EMOJI = "\N{PARTY POPPER}" * 15_500


@pytest.fixture
def fake(settings, fake_anthropic, tmp_path):
    use_fake_model(settings, fake_anthropic)
    settings.ANTHROPIC_MAX_TOKENS = 1000  # a call's output ceiling: $0.025 on Opus
    settings.SKILLS_DIRS = [tmp_path / "no-skills"]
    fake_anthropic.tokenizer = worst_case_tokens
    return fake_anthropic


async def test_two_parallel_emoji_runs_never_spend_past_a_fifty_cent_cap(fake, alice):
    await sync_to_async(user_limits)(alice, daily="0.50")
    release = threading.Event()
    fake.set_responder(lambda request: Reply.text("ok", output_tokens=10, wait_for=release))
    first = await Conversation.objects.acreate(owner=alice, title="a", model=TEST_MODEL)
    second = await Conversation.objects.acreate(owner=alice, title="b", model=TEST_MODEL)
    started = [
        await runs.start_run(first.pk, EMOJI, user_id=alice.pk),
        await runs.start_run(second.pk, OTHER_EMOJI, user_id=alice.pk),
    ]

    async def both_sent_or_one_refused() -> bool:
        refused = await Run.objects.filter(status=Run.FAILED, error_kind="budget").aexists()
        return refused or len(fake.requests) >= 2

    # Both answers are held open until both runs were admitted or one was refused: the race.
    await wait_until(both_sent_or_one_refused, what="both calls sent or one refused")
    release.set()
    for run in started:
        await runs.wait_for_run(run.pk, timeout=30)

    counter = await SpendCounter.objects.aget(
        scope=SpendCounter.USER, scope_id=alice.pk, period=SpendCounter.DAY
    )
    assert counter.reserved_usd == 0
    assert counter.spent_usd <= Decimal("0.50")
    # One emoji prompt alone costs more than half the cap: only one of them could be sent.
    calls = [call async for call in ModelCall.objects.all()]
    assert len(calls) == 1 and calls[0].cost_usd > Decimal("0.25")
    assert len(accepted(fake)) == 1
    ended = {run.status async for run in Run.objects.all()}
    assert ended == {Run.DONE, Run.FAILED}
    refused = await Run.objects.aget(status=Run.FAILED)
    assert refused.error_kind == "budget"
    refused_in = await Conversation.objects.aget(pk=refused.conversation_id)
    notice = (await sync_to_async(rows)(refused_in))[-1].content[0]["text"]
    assert re.search(r"daily spending limit of \$0\.50 has \$0\.\d\d left today", notice)
    assert re.search(r"could cost up to \$0\.\d\d .*so it was not sent", notice)


async def test_an_emoji_prompt_is_refused_alone_when_its_bound_does_not_fit(fake, alice):
    # $0.30: characters / 4 says the call costs about $0.05; billed at the worst it costs $0.39.
    await sync_to_async(user_limits)(alice, daily="0.30")
    fake.set_responder(lambda request: Reply.text("ok", output_tokens=10))
    conversation = await Conversation.objects.acreate(owner=alice, title="a", model=TEST_MODEL)
    run = await runs.start_run(conversation.pk, EMOJI, user_id=alice.pk)
    await runs.wait_for_run(run.pk, timeout=30)
    run = await Run.objects.aget(pk=run.pk)
    assert run.status == Run.FAILED and run.error_kind == "budget"
    assert accepted(fake) == []
    notice = (await sync_to_async(rows)(conversation))[-1].content[0]["text"]
    assert "limit of $0.30 has $0.30 left today ($0.00 spent); the next model call" in notice
    assert re.search(r"could cost up to \$0\.4\d", notice)
