"""Runs whose process died: marked interrupted with their history left valid for the API (every open
tool_use answered, the streamed text kept as a partial answer) and a Retry for the user."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from skills_app.core.transcript import StoredMessage, close_open_tool_uses
from skills_app.models import Approval, Conversation, Run, RunEvent
from skills_app.runs import store, tasks
from skills_app.runs.broadcast import broadcast_events

logger = logging.getLogger(__name__)


INTERRUPTED_MESSAGE = (
    "The server process running this answer stopped before it finished, so this message will not "
    "be sent with your next messages. Retry to continue."
)


def _stale_cutoff() -> datetime:
    return timezone.now() - timedelta(seconds=settings.RUN_STALE_SECONDS)


def _stale(cutoff: datetime) -> Q:
    # A run no worker ever claimed has no heartbeat: its age counts instead.
    return Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff)


def interrupt_orphaned_runs() -> int:
    """Mark runs left active by a process that died as interrupted, keeping their history valid.

    With RUN_EXECUTOR=inline (one process) every active run not executing here is orphaned; with
    workers only runs whose heartbeat is stale are, as the others are alive in another process.
    Returns how many were marked.
    """
    cutoff = timezone.now() if settings.RUN_EXECUTOR != "worker" else _stale_cutoff()
    ids = Run.objects.filter(status__in=Run.ACTIVE).values_list("pk", flat=True)
    events: list[RunEvent] = []
    fixed = 0
    for run_id in list(ids):
        if tasks.executing_here(run_id):
            continue
        marked = _interrupt(run_id, stale_before=cutoff, force=settings.RUN_EXECUTOR != "worker")
        fixed += bool(marked)
        events.extend(marked)
    if events:
        async_to_sync(broadcast_events)(events)
    return fixed


async def interrupt_stale_runs() -> int:
    """Mark active runs whose heartbeat is stale as interrupted (the periodic sweep of workers)."""
    cutoff = _stale_cutoff()
    ids = await sync_to_async(list)(
        Run.objects.filter(_stale(cutoff), status__in=Run.ACTIVE).values_list("pk", flat=True)
    )
    fixed = 0
    for run_id in ids:
        if tasks.executing_here(run_id):
            continue
        events = await sync_to_async(_interrupt)(run_id, stale_before=cutoff)
        if events:
            fixed += 1
            logger.warning("run %s had a stale heartbeat: marked interrupted", run_id)
            await broadcast_events(events)
    return fixed


def _interrupt(run_id: int, *, stale_before: datetime, force: bool = False) -> list[RunEvent]:
    """Mark one run interrupted if it is still active and stale; the events to broadcast.

    Kept: the text it had streamed (as a partial answer). Added: an "interrupted" tool_result for
    every unanswered tool_use, and an error row the user can Retry from.
    """
    with transaction.atomic():
        # Lock the run, then re-check under the lock: its heartbeat may have moved meanwhile.
        run = (
            Run.objects.select_for_update()
            .filter(pk=run_id, status__in=Run.ACTIVE)
            .filter(Q() if force else _stale(stale_before))
            .first()
        )
        if run is None:
            return []
        conversation = Conversation.objects.get(pk=run.conversation_id)
        events: list[RunEvent] = []

        def add(message: StoredMessage) -> None:
            row = store.append_message(conversation.pk, message, run_id=run.pk)
            data = store.message_event(row)
            event = store.append_event(
                conversation.pk, "message", data, run_id=run.pk, hidden=row.is_meta
            )
            events.append(event)

        closing = close_open_tool_uses(store.history(conversation))
        if closing:
            add(StoredMessage(role="user", kind="tool_result", content=tuple(closing)))
        partial = [
            {"type": "text", "text": b["text"].rstrip()}
            for b in store.streamed_text(run.pk)
            if b["text"].strip()
        ]
        if partial:
            add(StoredMessage(role="assistant", content=tuple(partial), meta={"partial": True}))
        # The turn got no complete answer: left out of later requests until the user retries it.
        store.exclude_latest_turn(conversation.pk, "failed")
        add(
            StoredMessage.text(
                "assistant",
                INTERRUPTED_MESSAGE,
                kind="error",
                to_model=False,
                meta={"code": "interrupted", "retry": True},
            )
        )
        now = timezone.now()
        for approval_id in Approval.objects.filter(run=run, status=Approval.PENDING).values_list(
            "pk", flat=True
        ):
            Approval.objects.filter(pk=approval_id).update(
                status=Approval.CANCELLED, answered_at=now
            )
            events.append(
                store.append_event(
                    conversation.pk,
                    "approval.answered",
                    {"approval_id": approval_id, "status": Approval.CANCELLED, "by": None},
                    run_id=run.pk,
                )
            )
        run.status = Run.INTERRUPTED
        run.error = INTERRUPTED_MESSAGE
        run.error_kind = "interrupted"
        run.finished_at = now
        run.save(update_fields=["status", "error", "error_kind", "finished_at"])
        events.append(
            store.append_event(
                conversation.pk,
                "run.finished",
                {
                    "run_id": run.pk,
                    "status": Run.INTERRUPTED,
                    "error": INTERRUPTED_MESSAGE,
                    "kind": "interrupted",
                },
                run_id=run.pk,
            )
        )
    return events
