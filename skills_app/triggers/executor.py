"""Executing trigger runs: inline in the web process, or claimed from the queue by a run worker.

A run is a `TriggerRun` row, a job like an agent run (`runs.jobs`; its kind `TRIGGER_RUNS`):
the same claim (oldest first, SKIP LOCKED, a conditional UPDATE one claimer wins, so a stop of a
queued run and a claim never both win), the same heartbeat (every RUN_HEARTBEAT_SECONDS, one for
all the trigger runs of an event loop, reading `stop_requested` and whether another process ended
the run), the same test for a run whose process is gone (`runs.interrupt_stale`, called by the
worker hook and the pages), and the same table of the jobs this process executes (`runs.tasks`:
how a stop cancels one here, how a stopping worker or process finds what to give up). `submit`
claims and starts it at once when RUN_EXECUTOR is "inline"; with "worker" it stays `queued`
until a run worker's round (`WorkerLoop._loop`, after its own claim) calls `claim_and_start`;
`give_up_here` when that worker (or the process) stops.

Each attempt is the first model call of a fresh conversation and nothing more: the answer is read
for a skill call, then dropped. Up to TRIGGER_CONCURRENCY calls of one run are in flight at once.
A model error that a retry cannot fix (authentication, an unknown model, a bad request) ends the
run as failed at once; a passing one (overloaded, rate limited) counts as that attempt's error.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from skills_app.core.admission import CallRefused
from skills_app.core.llm import ModelClient, ModelError, ModelRequest, final_message
from skills_app.core.pricing import USAGE_FIELDS, cost_usd
from skills_app.core.triggers.probe import chosen_skill
from skills_app.models import TriggerResult, TriggerRun
from skills_app.policy.access import policy_for
from skills_app.runs import jobs, liveness, queue, tasks
from skills_app.runs.client import model_client
from skills_app.runs.model_calls import metered
from skills_app.runs.spending import Spending
from skills_app.runs.wiring import Database
from skills_app.triggers import runs
from skills_app.triggers.setup import ProbeSetup, TriggerRunError, probe_setup

logger = logging.getLogger(__name__)

GAVE_UP_TEXT = "The process running it stopped. Start the run again."


class _Ended(Exception):
    """Another process ended the run (stopped or interrupted it): its answers are dropped."""


# --- starting ---------------------------------------------------------------------------------


async def submit(run: TriggerRun, *, client: ModelClient | None = None) -> None:
    """Start a created run: now, in this process (inline), or when a worker claims it."""
    if settings.RUN_EXECUTOR != "inline":
        # Queued: a worker's `claim_and_start` takes it; the wake-up only makes that sooner.
        await queue.wake_workers(run.pk)
        return
    claimed = await sync_to_async(claim)(worker=liveness.process_identity(), limit=1, run_id=run.pk)
    if claimed:
        spawn(run.pk, client=client)


def claim(*, worker: str, limit: int, run_id: int | None = None) -> list[int]:
    """Take up to `limit` queued trigger runs (or only `run_id`) for `worker`, oldest first."""
    taken = jobs.claim(runs.TRIGGER_RUNS, worker=worker, limit=limit, job_id=run_id)
    return [job.pk for job in taken]


def spawn(run_id: int, *, client: ModelClient | None = None) -> asyncio.Task[None]:
    """Execute a claimed run as a task of this event loop, listed with every job of the process
    (`runs.tasks`)."""
    # A fresh context: the run outlives the request that started it.
    task = asyncio.get_running_loop().create_task(
        execute(run_id, client=client), context=contextvars.Context()
    )
    tasks.open_group(runs.TRIGGER_RUNS, run_id, task)
    return task


async def _in_thread(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return await sync_to_async(fn)(*args, **kwargs)


async def claim_and_start(*, worker: str, database: Database | None = None) -> int:
    """The worker hook: interrupt stale trigger runs, claim what this worker has room for
    (TRIGGER_RUNS_PER_WORKER), start each. `database` runs a sync function off the event loop
    (the worker's own database thread); how many runs were started."""
    run_db = database or _in_thread
    await run_db(runs.interrupt_stale)
    free = settings.TRIGGER_RUNS_PER_WORKER - len(tasks.executing_ids(runs.TRIGGER_RUNS))
    if free <= 0:
        return 0
    claimed: list[int] = await run_db(claim, worker=worker, limit=free)
    for run_id in claimed:
        logger.info("worker %s claimed trigger run %s", worker, run_id)
        spawn(run_id)
    return len(claimed)


async def give_up_here() -> None:
    """A worker or the process is stopping: mark the trigger runs executing here interrupted,
    then end them."""
    ids = tasks.executing_ids(runs.TRIGGER_RUNS)
    if not ids:
        return
    await sync_to_async(
        lambda: TriggerRun.objects.filter(pk__in=ids, status=TriggerRun.RUNNING).update(
            status=TriggerRun.INTERRUPTED, error=GAVE_UP_TEXT, finished_at=timezone.now()
        )
    )()
    await tasks.cancel_jobs(runs.TRIGGER_RUNS, ids)


async def stop(run_id: int) -> None:
    """Stop a run wherever it is: queued (never starts), here (cancelled), elsewhere (flagged).

    Never waits for the run to end: the run records its own stop, and a caller holding the
    thread its database calls need (a request's) would wait for it forever.
    """
    if await sync_to_async(runs.stop_queued)(run_id):
        return
    # The flag reaches a run executing in another process with its next heartbeat.
    await sync_to_async(runs.request_stop)(run_id)
    tasks.cancel(runs.TRIGGER_RUNS, run_id)


# --- executing ----------------------------------------------------------------------------------


async def execute(run_id: int, *, client: ModelClient | None = None) -> None:
    """Run every attempt of a claimed run and record how it ended."""
    main = asyncio.current_task()
    assert main is not None
    heartbeats = jobs.heartbeats(runs.TRIGGER_RUNS, follow)
    heartbeats.add(run_id, main)
    try:
        await _attempt_all(run_id, client or model_client())
    except asyncio.CancelledError:
        await sync_to_async(_finish)(run_id, TriggerRun.STOPPED, runs.STOPPED_TEXT)
        raise
    except _Ended:
        logger.warning("trigger run %s was ended elsewhere; dropping the rest", run_id)
    except TriggerRunError as exc:
        await sync_to_async(_finish)(run_id, TriggerRun.FAILED, exc.message)
    except Exception as exc:
        logger.exception("trigger run %s failed", run_id)
        await sync_to_async(_finish)(
            run_id, TriggerRun.FAILED, f"The trigger run failed unexpectedly: {exc}"
        )
    else:
        await sync_to_async(_finish)(run_id, TriggerRun.DONE, "")
    finally:
        heartbeats.discard(run_id)


def _load(
    run_id: int, client: ModelClient
) -> tuple[TriggerRun, ProbeSetup, list[TriggerResult], Spending | None]:
    run = TriggerRun.objects.select_related("package", "version").get(pk=run_id)
    if run.package is None or run.version is None:
        raise TriggerRunError("The skill version was deleted before the run could start.")
    setup = probe_setup(run.package, run.version, model=run.model, profile=run.profile)
    # Every attempt is paid by the person who started the run, within their policy.
    spending = None
    if run.started_by_id is not None:
        spending = Spending(policy_for(run.started_by_id), "trigger", is_demo=client.is_demo)
    return run, setup, list(run.results.order_by("position")), spending


async def _attempt_all(run_id: int, client: ModelClient) -> None:
    run, setup, results, spending = await sync_to_async(_load)(run_id, client)
    requests = {r.pk: setup.request(r.query) for r in results}
    catalog = setup.skills.skills()
    pending: asyncio.Queue[TriggerResult] = asyncio.Queue()
    for _ in range(run.repetitions):
        for result in results:
            pending.put_nowait(result)

    # Set when the budget refuses an attempt: no new attempt starts, those in flight finish.
    refusal: list[str] = []

    async def worker() -> None:
        while True:
            if refusal:
                return
            try:
                result = pending.get_nowait()
            except asyncio.QueueEmpty:
                return
            try:
                message = await first_answer(client, requests[result.pk], spending=spending)
            except CallRefused as refused:
                # A budget reached mid-way ends the run; the answers so far are kept.
                refusal.append(refused.message)
                return
            except ModelError as exc:
                if not await sync_to_async(_record_error)(run_id, result.pk, exc.message):
                    raise _Ended from exc
                if not exc.retryable:
                    raise TriggerRunError(exc.message) from exc
                continue
            chosen = chosen_skill(message.get("content") or [], setup.profile, catalog)
            recorded = await sync_to_async(_record_answer)(
                run_id, result.pk, chosen=chosen, skill=setup.spec.name, message=message
            )
            if not recorded:
                raise _Ended

    workers = [asyncio.ensure_future(worker()) for _ in range(max(1, settings.TRIGGER_CONCURRENCY))]
    try:
        await asyncio.gather(*workers)
    finally:
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        if spending is not None:
            # What the attempts cost is written, the rest of the lease given back.
            await asyncio.shield(spending.close())
    if refusal:
        text = refusal[0]
        raise TriggerRunError(f"Stopped: {text[:1].lower()}{text[1:]}")


async def first_answer(
    client: ModelClient, request: ModelRequest, *, spending: Spending | None = None
) -> dict[str, Any]:
    """The model's whole first answer (its content and usage), admitted and settled as every
    model call is (`runs.model_calls`); no ModelCall row: the attempt's result counts it."""
    events = metered(request, client.stream(request), spending=spending, is_demo=client.is_demo)
    return await final_message(
        events, cut="The model's answer ended early; the attempt is counted as an error."
    )


def _usage(message: dict[str, Any]) -> dict[str, int]:
    usage = message.get("usage") or {}
    out = {}
    for key in USAGE_FIELDS:
        value = usage.get(key) or 0
        out[key] = (
            value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
        )
    return out


def _record_answer(
    run_id: int, result_id: int, *, chosen: str, skill: str, message: dict[str, Any]
) -> bool:
    """Count one answer; False (and nothing counted) when the run is no longer running."""
    usage = _usage(message)
    model = str(message.get("model") or "")
    try:
        cost = cost_usd(model, usage) if model else None
    except ValueError:
        cost = None
    with transaction.atomic():
        # A run stopped or interrupted meanwhile keeps what it had: late answers are dropped.
        if not TriggerRun.objects.filter(pk=run_id, status=TriggerRun.RUNNING).exists():
            return False
        result = TriggerResult.objects.select_for_update().get(pk=result_id)
        result.attempts += 1
        if chosen == skill:
            result.triggered += 1
        elif chosen:
            result.chosen = {**result.chosen, chosen: int(result.chosen.get(chosen, 0)) + 1}
        for key, value in usage.items():
            setattr(result, key, getattr(result, key) + value)
        if cost is not None:
            result.cost_usd = (result.cost_usd or Decimal(0)) + cost
        result.save()
        _add_to_run(run_id, usage, cost)
    return True


def _add_to_run(run_id: int, usage: dict[str, int], cost: Decimal | None) -> None:
    changes: dict[str, Any] = {"attempts_done": F("attempts_done") + 1}
    changes.update({key: F(key) + value for key, value in usage.items()})
    TriggerRun.objects.filter(pk=run_id).update(**changes)
    if cost is not None:
        run = TriggerRun.objects.select_for_update().get(pk=run_id)
        run.cost_usd = (run.cost_usd or Decimal(0)) + cost
        run.save(update_fields=["cost_usd"])


def _record_error(run_id: int, result_id: int, error: str) -> bool:
    """Count one failed attempt; False when the run is no longer running."""
    with transaction.atomic():
        if not TriggerRun.objects.filter(pk=run_id, status=TriggerRun.RUNNING).exists():
            return False
        TriggerResult.objects.filter(pk=result_id).update(
            errors=F("errors") + 1, last_error=error[:2000]
        )
        TriggerRun.objects.filter(pk=run_id).update(attempts_done=F("attempts_done") + 1)
    return True


def _finish(run_id: int, status: str, error: str) -> None:
    """Mark the run ended, unless another process already did (a stale sweep keeps its word)."""
    TriggerRun.objects.filter(pk=run_id, status=TriggerRun.RUNNING).update(
        status=status, error=error, finished_at=timezone.now()
    )


def follow(run_id: int, task: asyncio.Task[Any], status: str | None, stop: bool) -> bool:
    """End the run when a stop is asked or another process ended it; False once it is over."""
    if status != TriggerRun.RUNNING or stop:
        task.cancel()
        return False
    return True
