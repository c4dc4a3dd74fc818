"""Executing one run: build its runner, run it to the end and record how it ended."""

from __future__ import annotations

import asyncio
import logging

from asgiref.sync import sync_to_async
from django.db import transaction
from django.utils import timezone

from skills_app.core.agent import RunOutcome
from skills_app.core.events import ApprovalAnswered, RunFinished, RunStarted
from skills_app.core.llm import ModelClient
from skills_app.core.logcontext import log_context
from skills_app.mcp.elicitations import answered_event, cancel_pending
from skills_app.models import Approval, Run
from skills_app.runs import store
from skills_app.runs.client import model_client
from skills_app.runs.factory import RunSetup, build_runner, load_setup, spending_for
from skills_app.runs.forks import make_forker
from skills_app.runs.recorder import RunRecorder
from skills_app.runs.spending import Spending

logger = logging.getLogger(__name__)


async def execute_run(
    run_id: int,
    *,
    user_id: int,
    client: ModelClient | None = None,
    auto_answer: str | None = None,
) -> RunOutcome | None:
    """Run the agent loop for an existing Run row to completion, recording everything."""
    run = await Run.objects.select_related("conversation").aget(pk=run_id)
    with log_context(run_id=run.pk, conversation_id=run.conversation_id):
        return await _execute(run, user_id=user_id, client=client, auto_answer=auto_answer)


async def _execute(
    run: Run, *, user_id: int, client: ModelClient | None, auto_answer: str | None
) -> RunOutcome | None:
    client = client or model_client()
    conversation = run.conversation
    recorder = RunRecorder(conversation.pk, run.pk, user_id)
    # It reads the database (personal uploads, earlier skill hooks): not from async code directly.
    setup = await sync_to_async(load_setup)(conversation, model=run.model or None)
    spending = spending_for(setup, client, "turn")
    try:
        return await _run(run, setup, recorder, client, user_id, auto_answer, spending)
    finally:
        if spending is not None:
            # What the run spent is written, the rest of its lease given back, whatever happened.
            await asyncio.shield(spending.close())


async def _run(
    run: Run,
    setup: RunSetup,
    recorder: RunRecorder,
    client: ModelClient,
    user_id: int,
    auto_answer: str | None,
    spending: Spending | None,
) -> RunOutcome | None:
    conversation = run.conversation
    runner = await build_runner(
        setup,
        run_id=run.pk,
        user_id=user_id,
        client=client,
        recorder=recorder,
        auto_answer=auto_answer,
        # Skills with `context: fork` run as subagents in child runs of this one.
        forker=make_forker(setup, parent_run_id=run.pk, user_id=user_id, client=client),
        spending=spending,
    )
    rows = await sync_to_async(store.history)(conversation)
    await recorder.record(
        RunStarted(run_id=run.pk, model=run.model, label=run.model_label, demo=run.is_demo)
    )
    status, error, kind = Run.DONE, "", ""
    outcome: RunOutcome | None = None
    try:
        # A retry continues the stored turn: its message was handled (hooks, slash command) already.
        outcome = await runner.run(rows, None if run.retry else (run.prompt or None))
        if outcome.status == "failed":
            status, error, kind = Run.FAILED, outcome.error, outcome.error_kind
        elif outcome.status == "blocked":
            # A prompt a hook blocked is kept for the user but never sent to the model.
            await sync_to_async(store.keep_prompt_from_model)(run.pk)
    except asyncio.CancelledError:
        await recorder.flush()
        # Part of the transcript, like any notice: a reload and the export still say it.
        await recorder.message(store.stop_note())
        await finish(run.pk, recorder, Run.STOPPED, "Stopped by the user.", "stopped")
        raise
    except Exception as exc:
        logger.exception("run %s failed", run.pk)
        status, error, kind = Run.FAILED, f"The run failed unexpectedly: {exc}", "internal"
        try:
            await runner.notice_failure(error)
        except Exception:
            logger.exception("could not record the failure of run %s", run.pk)
    await recorder.flush()
    await finish(run.pk, recorder, status, error, kind)
    return outcome


async def finish(run_id: int, recorder: RunRecorder, status: str, error: str, kind: str) -> None:
    """Mark the run ended (unless another process already did) and announce it."""
    finished = await Run.objects.filter(pk=run_id, status__in=Run.ACTIVE).aupdate(
        status=status, error=error, error_kind=kind, finished_at=timezone.now()
    )
    if not finished:
        # Another process already marked it interrupted (its heartbeat looked dead); keep that.
        logger.warning(
            "run %s had already been finished elsewhere; not marking it %s", run_id, status
        )
        return
    # A stop can land between an approval's creation and the wait for its answer: nothing would
    # then answer it, and the chat would offer its buttons for good.
    for approval_id in await sync_to_async(_cancel_pending_approvals)(run_id):
        await recorder.record(
            ApprovalAnswered(approval_id=approval_id, status=Approval.CANCELLED, by=None)
        )
    for question in await sync_to_async(cancel_pending)(run_id):
        await recorder.record(answered_event(question))  # an MCP server's, likewise
    await recorder.record(RunFinished(run_id=run_id, status=status, error=error, kind=kind))


def _cancel_pending_approvals(run_id: int) -> list[int]:
    """Mark the run's unanswered approvals cancelled; their ids."""
    with transaction.atomic():
        pending = Approval.objects.select_for_update().filter(
            run_id=run_id, status=Approval.PENDING
        )
        ids = list(pending.values_list("pk", flat=True))
        Approval.objects.filter(pk__in=ids).update(
            status=Approval.CANCELLED, answered_at=timezone.now()
        )
    return ids
