"""Runs whose process died: the heartbeat tells them from live ones, and they end as interrupted."""

from __future__ import annotations

import asyncio
import io
import threading
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.core.management import call_command
from django.utils import timezone

from skills_app import textlog
from skills_app.core.transcript import StoredMessage
from skills_app.models import Approval, Conversation, Message, Run, RunEvent, StreamPiece
from skills_app.runs import (
    agent_setup,
    broadcast,
    ending,
    eventlog,
    recovery,
    store,
    streams,
)
from skills_app.runs import supervisor as runs
from tests.support.fake_anthropic import Reply, validate_request
from tests.support.loop_helpers import use_fake_model, wait_until

# Only the tests that run code in other threads (async ones) need real transactions.
pytestmark = pytest.mark.django_db


@pytest.fixture
def workers(settings):
    settings.RUN_EXECUTOR = "worker"
    settings.RUN_HEARTBEAT_SECONDS = 5
    settings.RUN_STALE_SECONDS = 30


def _run(owner, *, heartbeat_age: float | None, age: float = 0, status: str = Run.RUNNING) -> Run:
    """A run as a process left it; `heartbeat_age=None`: still queued, no worker took it."""
    conversation = Conversation.objects.create(owner=owner)
    now = timezone.now()
    queued = heartbeat_age is None
    run = Run.objects.create(
        conversation=conversation,
        status=Run.QUEUED if queued else status,
        heartbeat_at=None if queued else now - timedelta(seconds=heartbeat_age),
        worker="" if queued else "worker-host pid 1",
        channel="" if queued else "specific.gone!1",
    )
    # started_at is auto_now_add: set the age afterwards.
    Run.objects.filter(pk=run.pk).update(started_at=now - timedelta(seconds=age))
    store.append_message(conversation.pk, StoredMessage.text("user", "hello"), run_id=run.pk)
    return run


def _valid_after_another_turn(conversation: Conversation) -> str | None:
    """Why the API would reject the request after the user's next message (a Retry), or None."""
    store.append_message(conversation.pk, StoredMessage.text("user", "again"))
    return validate_request(agent_setup.build_request(conversation).as_kwargs())


def _statuses(*run_list: Run) -> list[str]:
    return [Run.objects.get(pk=r.pk).status for r in run_list]


@pytest.mark.django_db(transaction=True)
async def test_the_sweep_marks_runs_with_a_stale_heartbeat_and_leaves_live_and_queued_ones(
    workers, alice
):
    stale = await sync_to_async(_run)(alice, heartbeat_age=60, age=120)
    live = await sync_to_async(_run)(alice, heartbeat_age=2, age=120)
    queued = await sync_to_async(_run)(alice, heartbeat_age=None, age=3)
    # A queued run waits for a worker however long: it has no process that could have died.
    queued_for_an_hour = await sync_to_async(_run)(alice, heartbeat_age=None, age=3600)

    assert await sync_to_async(recovery.interrupt_orphaned_runs)() == 1

    assert await sync_to_async(_statuses)(stale, live, queued, queued_for_an_hour) == [
        Run.INTERRUPTED,
        Run.RUNNING,
        Run.QUEUED,
        Run.QUEUED,
    ]


def test_an_interrupted_run_keeps_its_streamed_text_and_a_valid_history(alice):
    run = _run(alice, heartbeat_age=60, age=60)
    conversation = run.conversation
    eventlog.append_event(conversation.pk, "model.call", {"call": 1}, run_id=run.pk)
    offset = 0
    for piece in ("The answer ", "was half ", "written "):
        StreamPiece.objects.create(run=run, call=1, index=0, kind="text", offset=offset, text=piece)
        offset += len(piece)

    assert recovery.interrupt_orphaned_runs() == 1

    rows = list(Message.objects.filter(conversation=conversation).order_by("seq"))
    assert [(r.role, r.kind) for r in rows] == [
        ("user", "text"),
        ("assistant", "text"),
        ("assistant", "error"),
    ]
    assert rows[1].content == [{"type": "text", "text": "The answer was half written"}]
    assert rows[1].meta == {"partial": True, "excluded": "failed"}
    assert rows[2].to_model is False and "Retry" in rows[2].content[0]["text"]
    assert rows[2].meta["retry"] is True
    # Retry sends the turn again (without its partial answer), and the next request is valid.
    assert store.prepare_retry(conversation.pk) == [rows[0].pk]
    request = agent_setup.build_request(conversation).as_kwargs()
    assert validate_request(request) is None and request["messages"][-1]["role"] == "user"
    assert _valid_after_another_turn(conversation) is None


def test_text_already_stored_as_a_message_is_not_kept_twice(alice):
    run = _run(alice, heartbeat_age=60)
    conversation = run.conversation
    StreamPiece.objects.create(run=run, call=0, index=0, kind="text", offset=0, text="Done.")
    row = store.append_message(
        conversation.pk, StoredMessage.text("assistant", "Done."), run_id=run.pk
    )
    eventlog.append_event(conversation.pk, "message", {"message_id": row.pk}, run_id=run.pk)

    recovery.interrupt_orphaned_runs()

    kinds = list(
        Message.objects.filter(conversation=conversation).order_by("seq").values_list("kind")
    )
    assert kinds == [("text",), ("text",), ("error",)]


def test_open_tool_uses_are_answered_and_pending_approvals_cancelled_with_events(workers, alice):
    run = _run(alice, heartbeat_age=45, status=Run.WAITING)
    conversation = run.conversation
    store.append_message(
        conversation.pk,
        StoredMessage(
            role="assistant",
            kind="tool_use",
            content=(
                {"type": "tool_use", "id": "toolu_a", "name": "Bash", "input": {"command": "ls"}},
                {"type": "tool_use", "id": "toolu_b", "name": "Read", "input": {"path": "x"}},
            ),
        ),
        run_id=run.pk,
    )
    approval = Approval.objects.create(
        conversation=conversation, run=run, tool="Bash", call_text="Bash(ls)"
    )

    assert recovery.interrupt_orphaned_runs() == 1

    answered = Message.objects.filter(conversation=conversation, kind="tool_result").get()
    assert [b["tool_use_id"] for b in answered.content] == ["toolu_a", "toolu_b"]
    assert all(b["is_error"] for b in answered.content)
    assert Approval.objects.get(pk=approval.pk).status == Approval.CANCELLED
    types = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("type", flat=True))
    assert types == ["message.stored", "message.stored", "approval.answered", "run.finished"]
    assert _valid_after_another_turn(conversation) is None


@pytest.mark.django_db(transaction=True)
async def test_browsers_watching_the_conversation_are_told(workers, alice):
    run = await sync_to_async(_run)(alice, heartbeat_age=60)
    layer = get_channel_layer()
    watcher = await layer.new_channel()
    await layer.group_add(broadcast.group_name(run.conversation_id), watcher)

    await sync_to_async(recovery.interrupt_orphaned_runs)()

    received = [await asyncio.wait_for(layer.receive(watcher), 5) for _ in range(2)]
    assert [m["type"] for m in received] == ["message.stored", "run.finished"]
    assert received[1]["event"]["status"] == Run.INTERRUPTED
    # Announced as data: the error row, for everyone (each tab renders it with its Retry).
    assert received[0]["hidden"] is False and "html" not in received[0]
    error = await Message.objects.aget(pk=received[0]["event"]["message_id"])
    assert error.kind == "error" and not error.is_meta
    await layer.flush()


def test_bootstrap_with_workers_leaves_runs_with_a_live_heartbeat_alone(workers, alice, admin_user):
    live = _run(alice, heartbeat_age=1, age=600)
    dead = _run(alice, heartbeat_age=600, age=600)
    out = io.StringIO()
    call_command("bootstrap", stdout=out)
    assert "Marked 1 run(s)" in out.getvalue()
    assert _statuses(live, dead) == [Run.RUNNING, Run.INTERRUPTED]


def test_bootstrap_in_one_process_takes_every_active_run_as_orphaned(settings, alice, admin_user):
    settings.RUN_EXECUTOR = "inline"
    fresh = _run(alice, heartbeat_age=1)
    call_command("bootstrap", stdout=io.StringIO())
    assert _statuses(fresh) == [Run.INTERRUPTED]


@pytest.mark.django_db(transaction=True)
async def test_a_new_message_replaces_a_run_whose_process_died(settings, fake_anthropic, alice):
    use_fake_model(settings, fake_anthropic)
    dead = await sync_to_async(_run)(alice, heartbeat_age=600, age=600)
    fake_anthropic.enqueue(Reply.text("Back again."))
    run = await runs.start_run(dead.conversation_id, "are you there?", user_id=alice.pk)
    await runs.wait_for_run(run.pk, timeout=20)
    assert await sync_to_async(_statuses)(dead, run) == [Run.INTERRUPTED, Run.DONE]
    assert fake_anthropic.requests[-1].status == 200


@pytest.mark.django_db(transaction=True)
async def test_a_new_message_is_refused_while_a_live_run_is_active(workers, alice):
    live = await sync_to_async(_run)(alice, heartbeat_age=1)
    with pytest.raises(runs.RunError, match="already in progress"):
        await runs.start_run(live.conversation_id, "hello?", user_id=alice.pk)
    assert await sync_to_async(_statuses)(live) == [Run.RUNNING]


@pytest.mark.django_db(transaction=True)
async def test_stopping_a_run_whose_process_died_marks_it_interrupted(workers, alice):
    dead = await sync_to_async(_run)(alice, heartbeat_age=600)
    assert await runs.stop_run(dead.pk)
    assert await sync_to_async(_statuses)(dead) == [Run.INTERRUPTED]


@pytest.mark.django_db(transaction=True)
async def test_stopping_a_live_run_that_does_not_answer_reports_failure(
    workers, settings, alice, monkeypatch
):
    settings.RUN_HEARTBEAT_SECONDS = 0.1
    monkeypatch.setattr(ending, "STOP_WAIT_SECONDS", 0.3)
    live = await sync_to_async(_run)(alice, heartbeat_age=1)
    assert await runs.stop_run(live.pk) is False
    run = await Run.objects.aget(pk=live.pk)
    assert run.status == Run.RUNNING and run.stop_requested


async def _until_saved(run_id: int) -> None:
    """Wait (bounded) until some of the run's streamed text is in the database."""

    async def saved() -> bool:
        return bool(await sync_to_async(textlog.streamed_text)(run_id))

    await wait_until(saved, timeout=5, what="saving the streamed text")


async def _journal_idle() -> bool:
    return streams.journal().idle()


@pytest.mark.django_db(transaction=True)
async def test_a_run_taken_for_dead_drops_what_it_still_produces(settings, fake_anthropic, alice):
    """A false alarm (a heartbeat delayed past the limit) must not corrupt the closed history."""
    use_fake_model(settings, fake_anthropic)
    settings.RUN_HEARTBEAT_SECONDS = 0.1
    conversation = await Conversation.objects.acreate(owner=alice)
    gate, reached = threading.Event(), threading.Event()
    fake_anthropic.enqueue(
        Reply.text("Words " * 20, chunk=4, wait_for=gate, wait_after_events=6, reached=reached)
    )
    run = await runs.start_run(conversation.pk, "talk", user_id=alice.pk)
    assert await asyncio.get_running_loop().run_in_executor(None, reached.wait, 10)
    await _until_saved(run.pk)
    # Another process declares it dead; this one notices at its next heartbeat.
    await sync_to_async(recovery.interrupt_runs)([run.pk])
    try:
        await runs.wait_for_run(run.pk, timeout=10)
    finally:
        gate.set()
    # The run's task has ended (wait_for_run); what could still write is the live text's
    # journal, so wait until it has let go of the run's streams and finished any commit.
    await wait_until(_journal_idle, what="the live text's journal letting go of the run")
    final = await Run.objects.aget(pk=run.pk)
    assert final.status == Run.INTERRUPTED
    kinds = [
        (row.role, row.kind)
        async for row in Message.objects.filter(conversation=conversation).order_by("seq")
    ]
    assert kinds == [("user", "text"), ("assistant", "text"), ("assistant", "error")]
    assert await sync_to_async(_valid_after_another_turn)(conversation) is None
    # Not even a piece of streamed text was saved after the history was closed.
    types = [e.type async for e in RunEvent.objects.filter(run=run).order_by("seq")]
    assert types[-1] == "run.finished", types
