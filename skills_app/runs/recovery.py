"""Runs whose process died: marked interrupted with their history left valid for the API (every open
tool_use answered, the streamed text kept as a partial answer) and a Retry for the user.

A run is orphaned when it was taken by a process and that process is gone: its worker stopped
beating (WORKER_STALE_SECONDS, seconds) or its own heartbeat is stale (RUN_STALE_SECONDS, the
backstop for inline runs and for a run task that died inside a live worker): `jobs.orphaned`,
the same test trigger runs are swept by. A queued run is never orphaned.

Who looks: every worker, and every web process once a browser or a probe has reached it (daphne
has no start-up hook; the first websocket or `/readyz` starts the sweep, owned by the process and
not by that request, `ensure_sweeping`), each every quarter of a
worker heartbeat, in a database thread of its own. Web processes matter when the only worker
dies: nobody else would notice. `manage.py bootstrap` and a new message or a Stop in the
conversation check too.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import math

from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.models import Q
from django.utils import timezone

from skills_app import textlog
from skills_app.core.logcontext import log_context
from skills_app.core.outages import Outage, RateLimited
from skills_app.core.transcript import StoredMessage, close_open_tool_uses
from skills_app.database_thread import DatabaseThread
from skills_app.mcp import elicitations
from skills_app.models import Approval, Conversation, Run, RunEvent
from skills_app.runs import eventlog, jobs, liveness, store, tasks
from skills_app.runs.broadcast import broadcast_events, publish, typed

logger = logging.getLogger(__name__)


INTERRUPTED_MESSAGE = (
    "The server process running this answer stopped before it finished, so this message will not "
    "be sent with your next messages. Retry to continue."
)
# Ended workers' rows are pruned once every this many sweeps (about an hour at the default).
PRUNE_EVERY = 7200


def interrupt_if_orphaned(run_id: int, *, trusted_for: float = math.inf) -> list[RunEvent]:
    """Mark one run interrupted if its process is gone; the events to broadcast."""
    return _interrupt(run_id, when=jobs.orphaned(jobs.RUNS, trusted_for=trusted_for))


def sweep(trusted_for: float = math.inf) -> list[RunEvent]:
    """Bury dead workers and interrupt the orphaned runs; the events to broadcast.

    The sweeps of workers and web processes pass how long their database thread has reached
    the database without a break, so that one that has just regained it buries nobody.
    """
    for name in liveness.bury_dead_workers(trusted_for=trusted_for):
        logger.warning("worker %s stopped beating; its runs are marked interrupted", name)
    events: list[RunEvent] = []
    candidates = Run.objects.filter(jobs.orphaned(jobs.RUNS, trusted_for=trusted_for)).values_list(
        "pk", "conversation_id", "worker"
    )
    for run_id, conversation_id, worker in list(candidates):
        if tasks.executing_here(jobs.RUNS, run_id):
            continue
        marked = interrupt_if_orphaned(run_id, trusted_for=trusted_for)
        if marked:
            with log_context(run_id=run_id, conversation_id=conversation_id):
                logger.warning("run %s of %s marked interrupted", run_id, worker or "no worker")
        events.extend(marked)
    return events


def interrupt_runs(run_ids: list[int]) -> list[RunEvent]:
    """Mark these runs interrupted whatever their heartbeat (their worker is giving them up)."""
    events: list[RunEvent] = []
    for run_id in run_ids:
        events.extend(_interrupt(run_id, when=Q(status__in=Run.EXECUTING)))
    return events


async def sweep_forever(database: DatabaseThread) -> None:
    """Sweep now and then every quarter of a worker heartbeat, until cancelled.

    Events whose announcement failed (the channel layer away) stay pending
    and are sent again next round, until they go out: a tab is told even when the first try was
    not heard. Tabs drop a seq they already have, so a repeat is harmless.
    """
    rounds = 0
    outage = Outage("the database", logger, who="the sweep for orphaned runs")
    failures = RateLimited(logger)
    pending: list[RunEvent] = []
    while True:
        try:
            pending.extend(await database.run(sweep, database.continuity.seconds()))
            if pending:
                await _announce(pending)
            rounds += 1
            if rounds % PRUNE_EVERY == 0:
                await database.run(liveness.forget_old_workers)
                await database.run(textlog.forget_pieces)
            outage.recovered()
        except DatabaseError as exc:
            outage.failed(exc, retry_in=liveness.sweep_interval())
        except Exception:
            failures.exception("sweep", "the sweep for orphaned runs failed; trying again")
        await asyncio.sleep(liveness.sweep_interval())


async def _announce(pending: list[RunEvent]) -> None:
    """Announce the pending events in order, removing each once it went out."""
    ready = typed(pending)
    # An event `typed` could not read was logged there and will never go out: not kept.
    pending[:] = [row for row, _ in ready]
    for row, event in ready:
        await publish(row.conversation_id, row.seq, event, hidden=row.hidden)
        pending.pop(0)


# This process's sweep (web processes): its task, and the thread it queries the database from.
_sweeper: asyncio.Task[None] | None = None
_sweep_database: DatabaseThread | None = None


def ensure_sweeping() -> None:
    """Start this web process's sweep when runs go to workers (once; again if its loop ended).

    The sweep belongs to the process, not to the request that happens to start it (daphne has
    no ASGI lifespan to start it from). It runs in a fresh, empty context: a task inherits its
    creator's context, and a request's holds asgiref's executor for that request's sync thread,
    which quits when the request ends; every later `sync_to_async` of the sweep then failed
    ("CurrentThreadExecutor already quit"), so runs were marked interrupted and no tab was told.
    In an empty context asgiref uses its process-wide thread, which lives as long as the process.
    A thread and loop of its own would work too, but the sweep announces through this loop's
    channel layer (its Redis connections belong to this loop), so it stays on this loop.
    """
    global _sweeper, _sweep_database
    if settings.RUN_EXECUTOR != "worker":
        return
    if _sweeper is not None and not _sweeper.done() and not _sweeper.get_loop().is_closed():
        return
    if _sweep_database is None:
        _sweep_database = DatabaseThread("skillscope-sweep")
    _sweeper = asyncio.get_running_loop().create_task(
        sweep_forever(_sweep_database), name="skillscope-sweep", context=contextvars.Context()
    )


def interrupt_orphaned_runs() -> int:
    """Mark runs left active by a process that died as interrupted, keeping their history valid.

    With RUN_EXECUTOR=inline (one process) every active run not executing here is orphaned; with
    workers only runs whose worker or heartbeat is gone are, as the others are alive in another
    process (and queued ones wait for a worker). Returns how many were marked.
    """
    if settings.RUN_EXECUTOR == "worker":
        events = sweep()
    else:
        events = []
        for run_id in list(Run.objects.filter(status__in=Run.ACTIVE).values_list("pk", flat=True)):
            if not tasks.executing_here(jobs.RUNS, run_id):
                events.extend(_interrupt(run_id, when=Q()))
    if events:
        async_to_sync(broadcast_events)(events)
    return sum(1 for e in events if e.type == "run.finished")


def _interrupt(run_id: int, *, when: Q) -> list[RunEvent]:
    """Mark one run interrupted if it is still active and `when` holds; the events to broadcast.

    Kept: the text it had streamed (as a partial answer). Added: an "interrupted" tool_result for
    every unanswered tool_use, and an error row the user can Retry from.
    """
    with transaction.atomic():
        # Lock the run, then re-check under the lock: its heartbeat may have moved meanwhile.
        run = (
            Run.objects.select_for_update(of=("self",))
            .filter(pk=run_id, status__in=Run.ACTIVE)
            .filter(when)
            .first()
        )
        if run is None:
            return []
        conversation = Conversation.objects.get(pk=run.conversation_id)
        events: list[RunEvent] = []

        def add(message: StoredMessage) -> None:
            row = store.append_message(conversation.pk, message, run_id=run.pk)
            data = eventlog.message_event(row)
            event = eventlog.append_event(
                conversation.pk, "message", data, run_id=run.pk, hidden=row.is_meta
            )
            events.append(event)

        closing = close_open_tool_uses(store.history(conversation))
        if closing:
            add(StoredMessage(role="user", kind="tool_result", content=tuple(closing)))
        partial = [
            {"type": "text", "text": b["text"].rstrip()}
            for b in textlog.streamed_text(run.pk)
            if b["text"].strip()
        ]
        if partial:
            add(StoredMessage(role="assistant", content=tuple(partial), meta={"partial": True}))
        textlog.forget_pieces([run.pk])  # the partial answer holds them now
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
                eventlog.append_event(
                    conversation.pk,
                    "approval.answered",
                    {"approval_id": approval_id, "status": Approval.CANCELLED, "by": None},
                    run_id=run.pk,
                )
            )
        # An MCP server's questions likewise: their cards say they are over.
        for question in elicitations.cancel_pending(run.pk, elicitations.INTERRUPTED):
            events.append(
                eventlog.append_event(
                    conversation.pk, elicitations.answered_event(question), run_id=run.pk
                )
            )
        # Subagents run inside their parent's task: they ended with it.
        Run.objects.filter(parent_id=run.pk, status__in=Run.ACTIVE).update(
            status=Run.INTERRUPTED,
            error=INTERRUPTED_MESSAGE,
            error_kind="interrupted",
            finished_at=now,
        )
        run.status = Run.INTERRUPTED
        run.error = INTERRUPTED_MESSAGE
        run.error_kind = "interrupted"
        run.finished_at = now
        run.save(update_fields=["status", "error", "error_kind", "finished_at"])
        events.append(
            eventlog.append_event(
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
