"""Sending limits (#26) under parallel sockets (#23's sessions): the check and the run it admits
must be one step.

The attack: one chatter opens several tabs (one socket per conversation) and sends in all of
them at once. Each send checked the limits (runs in progress, messages this minute) and only
then created its run, so every check saw the same count and all of them passed: with
RATE_LIMIT_CONCURRENT_RUNS=2, six runs ran at once (each can run commands in the sandbox: the
server's CPU is what the limit protects). Positive control: the first runs do start.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from skills_app.models import Conversation, Run
from tests.security.helpers import open_tab, resume
from tests.support.fake_anthropic import Reply
from tests.support.frames import parse
from tests.support.loop_helpers import use_fake_model, wait_until

pytestmark = pytest.mark.django_db(transaction=True)
TABS = 6


@pytest.mark.parametrize("limit", ["concurrent", "per_minute"])
async def test_parallel_sends_in_many_tabs_keep_to_the_limits(
    settings, fake_anthropic, alice, limit
):
    use_fake_model(settings, fake_anthropic, retries=0)
    if limit == "concurrent":
        settings.RATE_LIMIT_CONCURRENT_RUNS = 2
        settings.RATE_LIMIT_MESSAGES_PER_MINUTE = 1000
    else:
        settings.RATE_LIMIT_CONCURRENT_RUNS = 1000
        settings.RATE_LIMIT_MESSAGES_PER_MINUTE = 2
    hold = threading.Event()
    fake_anthropic.set_responder(lambda request: Reply.text("held answer", wait_for=hold))
    conversations = [
        await Conversation.objects.acreate(owner=alice, title=f"tab {n}") for n in range(TABS)
    ]
    tabs = []
    for conversation in conversations:
        tab, connected = await open_tab(alice, conversation.pk)
        assert connected
        await resume(tab)
        tabs.append(tab)
    try:
        await asyncio.gather(
            *(tab.send_json_to({"action": "send", "text": "at once"}) for tab in tabs)
        )

        # Every tab answers: its run's first frames, or the refusal.
        async def answered(tab) -> bool:
            frame = parse(await tab.receive_from(timeout=20))
            return "limit is" in frame.get("message", "") or "seq" in frame

        for tab in tabs:
            assert await answered(tab)
        runs = Run.objects.filter(conversation__owner=alice)

        async def settled() -> bool:
            return await runs.acount() >= 2

        await wait_until(settled, what="the first runs to start")
        started = await runs.acount()
        assert started == 2, f"{started} runs started with a limit of 2"
    finally:
        hold.set()
        for tab in tabs:
            await tab.disconnect()
        for run in [r async for r in Run.objects.filter(conversation__owner=alice)]:
            from skills_app.runs import supervisor

            await supervisor.wait_for_run(run.pk, timeout=30)
