"""The inline runs of one process share their heartbeat: one UPDATE and one SELECT for all of them
every RUN_HEARTBEAT_SECONDS, and each run still follows what the beat reads of it (issue 27)."""

from __future__ import annotations

import asyncio
import threading

import pytest
from asgiref.sync import sync_to_async

from skills_app.models import Conversation, Run
from skills_app.runs import jobs
from skills_app.runs import supervisor as runs
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import use_fake_model, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


async def _started(fake_anthropic, alice, count: int) -> tuple[list[Run], threading.Event]:
    """`count` inline runs, each held mid-answer until the returned gate opens."""
    gate = threading.Event()
    started = []
    for i in range(count):
        reached = threading.Event()
        fake_anthropic.enqueue(
            Reply.text(
                f"Answer {i} " * 10, chunk=4, wait_for=gate, wait_after_events=4, reached=reached
            )
        )
        conversation = await Conversation.objects.acreate(owner=alice, title=f"c{i}")
        started.append(await runs.start_run(conversation.pk, f"talk {i}", user_id=alice.pk))
        assert await asyncio.get_running_loop().run_in_executor(None, reached.wait, 10)
    return started, gate


async def test_one_beat_touches_every_inline_run_and_each_follows_its_own_row(
    settings, fake_anthropic, alice, monkeypatch
):
    use_fake_model(settings, fake_anthropic)
    settings.RUN_HEARTBEAT_SECONDS = 0.1
    beaten: list[list[int]] = []
    real = jobs.beat

    def counted(kind: jobs.Kind, run_ids: list[int]) -> dict[int, tuple[str, bool]]:
        beaten.append(sorted(run_ids))
        return real(kind, run_ids)

    monkeypatch.setattr(jobs, "beat", counted)
    started, gate = await _started(fake_anthropic, alice, 3)
    ids = sorted(run.pk for run in started)
    try:
        # Beats go on while the runs wait for the model, each one for all three runs.
        async def joint() -> bool:
            return beaten.count(ids) >= 3

        await wait_until(joint, timeout=10, what="three joint beats")
        fresh = await sync_to_async(
            lambda: list(Run.objects.filter(pk__in=ids).values_list("heartbeat_at", flat=True))
        )()
        assert all(beat is not None for beat in fresh)
        # Another process asks the middle run to stop: only that run's task is cancelled.
        await Run.objects.filter(pk=ids[1]).aupdate(stop_requested=True)
        await runs.wait_for_run(ids[1], timeout=10)
        assert (await Run.objects.aget(pk=ids[1])).status == Run.STOPPED
        beaten.clear()

        async def rest() -> bool:
            return [ids[0], ids[2]] in beaten

        await wait_until(rest, timeout=10, what="a beat of the others")
        statuses = [run.status async for run in Run.objects.filter(pk__in=[ids[0], ids[2]])]
        assert statuses == [Run.RUNNING, Run.RUNNING]
    finally:
        gate.set()
    for run_id in (ids[0], ids[2]):
        await runs.wait_for_run(run_id, timeout=10)
        assert (await Run.objects.aget(pk=run_id)).status == Run.DONE

    # With no run left the beating task ends, and beats no more.
    async def idle() -> bool:
        return runs.heartbeats().idle()

    await wait_until(idle, timeout=5, what="the heartbeats ending")
