"""Starting and supervising runs (stopping, waiting for and giving them up: `runs.ending`).

Where a run executes depends on RUN_EXECUTOR: "inline" runs it as a task of the process that
started it; "worker" queues it (`runs.queue`: a database row, status `queued`) until a Channels
worker (`skills_app.runs.workers`) claims it. Either way the user's message is stored first, in
the transaction that creates the run. The executing process keeps `Run.heartbeat_at` fresh (every
RUN_HEARTBEAT_SECONDS: inline runs all at once per event loop, `jobs.Heartbeats`; a worker for all
its runs at once), so a run whose process died is recognised and marked interrupted (`recovery`).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Protocol

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from skills_app import sent_texts, visibility
from skills_app.core.agent import RunOutcome, SkillProvider
from skills_app.core.events import RunFinished, RunQueued
from skills_app.core.llm import ModelClient
from skills_app.core.profiles import slash_invokes
from skills_app.core.skilltool import parse_slash_command
from skills_app.core.transcript import StoredMessage
from skills_app.mcp import prompts as mcp_prompts
from skills_app.models import Conversation, Run, RunEvent
from skills_app.policy import limits
from skills_app.policy.access import user_groups
from skills_app.runs import (
    agent_setup,
    attached,
    broadcast,
    eventlog,
    jobs,
    pending,
    store,
    tasks,
    wiring,
)
from skills_app.runs.client import model_client
from skills_app.runs.ending import drain, give_up, shutdown, stop_run, wait_for_run
from skills_app.runs.errors import LimitRefusal, RunError
from skills_app.runs.execute import execute_run
from skills_app.runs.liveness import process_identity
from skills_app.runs.queue import RUN_CHANNEL, wake_workers
from skills_app.runs.recovery import interrupt_if_orphaned

logger = logging.getLogger(__name__)

__all__ = [
    "RUN_CHANNEL",
    "LimitRefusal",
    "Prepare",
    "RunError",
    "drain",
    "give_up",
    "process_identity",
    "shutdown",
    "start_run",
    "start_runs",
    "stop_run",
    "wait_for_run",
]


# Changes made in the transaction that creates a run, before its message is stored (an edit's
# or a regeneration's replaced turn): undone with it when the run is refused. Their events are
# broadcast with the run's.
Prepare = Callable[[], Sequence[RunEvent]]


def _admit(user_id: int, runs_wanted: int) -> None:
    """The one check of the person's limits for the runs this transaction creates (inside it,
    after `limits.hold`: parallel starts wait for each other's count)."""
    try:
        limits.check_send(user_id, runs_wanted=runs_wanted)
    except limits.LimitReached as exc:
        raise LimitRefusal(exc.message) from None


def _create_run(
    conversation_id: int,
    prompt: str | None,
    client: ModelClient,
    *,
    inline: bool,
    retry: bool,
    user_id: int,
    auto_answer: str | None,
    attachments: Sequence[int] = (),
    within_limits: int | None = None,
    prepare: Prepare | None = None,
) -> tuple[Run, list[RunEvent]]:
    """The new Run row, with the user's message stored at once, and the events to broadcast."""
    with transaction.atomic():
        if within_limits is not None:
            limits.hold(user_id)
            _admit(user_id, within_limits)
        return _new_run(
            conversation_id,
            prompt,
            client,
            inline=inline,
            retry=retry,
            user_id=user_id,
            auto_answer=auto_answer,
            attachments=attachments,
            prepare=prepare,
        )


def _create_runs(
    conversations: Callable[[], Sequence[int]],
    prompt: str,
    client: ModelClient,
    *,
    inline: bool,
    user_id: int,
) -> list[tuple[Run, list[RunEvent]]]:
    """The conversations `conversations()` creates, each with a new run of the same message, in
    one transaction: admitted together, refused together."""
    with transaction.atomic():
        limits.hold(user_id)  # before the new rows, which refer to the person's row
        ids = conversations()
        _admit(user_id, len(ids))
        return [
            _new_run(
                conversation_id,
                prompt,
                client,
                inline=inline,
                retry=False,
                user_id=user_id,
                auto_answer=None,
            )
            for conversation_id in ids
        ]


def _new_run(
    conversation_id: int,
    prompt: str | None,
    client: ModelClient,
    *,
    inline: bool,
    retry: bool,
    user_id: int,
    auto_answer: str | None,
    attachments: Sequence[int] = (),
    prepare: Prepare | None = None,
) -> tuple[Run, list[RunEvent]]:
    """`_create_run` inside its transaction, the person's limits already checked."""
    conversation = Conversation.objects.select_for_update().get(pk=conversation_id)
    if conversation.deleted_at is not None:
        raise RunError("This conversation was deleted; start a new one.")
    # Every entrance starts runs here (the chat, queued messages sent when a run ends, the
    # command line): a deactivated account starts nothing, whatever was queued for it.
    if not get_user_model().objects.filter(pk=user_id, is_active=True).exists():
        raise RunError("This account is deactivated, so nothing is sent for it.")
    events: list[RunEvent] = []
    for active in conversation.runs.filter(status__in=Run.ACTIVE).values_list("pk", flat=True):
        # A run whose process died does not block the conversation forever.
        if not tasks.executing_here(jobs.RUNS, active):
            events.extend(interrupt_if_orphaned(active))
    if conversation.runs.filter(status__in=Run.ACTIVE).exists():
        raise RunError(
            "A run is already in progress in this conversation. Wait for it or stop it first."
        )
    if prepare is not None:
        events.extend(prepare())
    if retry and store.prepare_retry(conversation.pk) is None:
        raise RunError(
            "There is nothing to send again: your last message was answered, or you went on "
            "since. Type a new message instead."
        )
    run = Run.objects.create(
        conversation=conversation,
        # An inline run executes from now on; a worker run waits in the queue until claimed.
        status=Run.RUNNING if inline else Run.QUEUED,
        model=conversation.model or client.model,
        model_label=client.label,
        is_demo=client.is_demo,
        worker=process_identity() if inline else "",
        heartbeat_at=timezone.now() if inline else None,
        prompt=prompt or "",
        retry=retry,
        started_by_id=user_id,
        auto_answer=auto_answer or "",
    )
    if prompt is not None and not retry:
        events.extend(_store_attachments(conversation, run, user_id, attachments))
        events.append(_store_prompt(conversation, run, prompt, prompt))
    if not inline:
        events.append(
            eventlog.append_event(conversation.pk, RunQueued(run_id=run.pk), run_id=run.pk)
        )
    return run, events


def _store_attachments(
    conversation: Conversation, run: Run, user_id: int, ids: Sequence[int]
) -> list[RunEvent]:
    """The files sent with the message: one row right before it (RunError if one cannot go)."""
    try:
        message, claimed = attached.stored_message(conversation.pk, user_id, ids)
    except attached.AttachmentError as exc:
        raise RunError(str(exc)) from None
    if message is None:
        return []
    row = store.append_message(conversation.pk, message, run_id=run.pk)
    attached.mark_sent(claimed, row.pk)
    return [
        eventlog.append_event(
            conversation.pk, "message", eventlog.message_event(row), run_id=run.pk
        )
    ]


def _store_prompt(conversation: Conversation, run: Run, prompt: str, typed: str) -> RunEvent:
    """The user's message, stored the moment it is sent (whatever executes the run, and when).

    A slash command is stored as the user typed it, for people (`kind="command"`, kept from the
    model, which gets the skill's status and hidden rows instead); a profile that reproduces a
    design without slash commands sends the text to the model as typed.
    """
    skills: SkillProvider | None = None

    def is_skill(name: str) -> bool:
        # Read only for a message that starts with "/": listing the owner's skills (the
        # registry, their uploads, the deny rules) was most of the cost of storing a message.
        nonlocal skills
        if skills is None:
            skills = agent_setup.skills_for_conversation(conversation)
        return skills.get(name) is not None

    command = parse_slash_command(prompt, is_skill)
    if command is None or not slash_invokes(agent_setup.agent_config(conversation)):
        message = StoredMessage.text("user", prompt)
    else:
        message = StoredMessage.text("user", prompt, kind="command", to_model=False)
    row = store.append_message(conversation.pk, message, run_id=run.pk)
    # What they typed is theirs: no one else's MCP call may carry it (`sent_texts`).
    # (A server's prompt text is the server's: only the command they typed counts.)
    sent_texts.remember(run.started_by_id or conversation.owner_id, [typed])
    data = eventlog.message_event(row)
    return eventlog.append_event(conversation.pk, "message", data, run_id=run.pk)


async def start_run(
    conversation_id: int,
    text: str | None,
    *,
    user_id: int,
    auto_answer: str | None = None,
    retry: bool = False,
    attachments: Sequence[int] = (),
    within_limits: int | None = None,
    prepare: Prepare | None = None,
) -> Run:
    """Store the user's message, create a run and hand it to the configured executor.

    `attachments`: ids of pending files (`chat.attachments`) sent with the message.

    `within_limits`: how many runs the person's limits must leave room for, checked once in the
    transaction that creates the run; LimitRefusal says which limit stands in the way. None: no
    limits (the command line, run by an operator).

    `prepare`: changes to make in that transaction before the message is stored (an edit's
    replaced turn), undone with it when the run is refused; what it raises is raised as is.

    `retry` answers the latest failed or refused turn again (its rows are sent to the model again,
    `transcript.retry_turn`) without storing the message a second time; RunError when there is
    nothing to retry.

    A message that invokes an MCP server's prompt is checked first (an argument missing, the MCP
    calls quota), then its run admitted, and only then is the server asked (`_start_prompt_run`).
    """
    client = model_client()
    executor = get_executor()
    invocation = None
    if text is not None and not retry:
        invocation = await _prompt_invocation(text, user_id)
    if text is not None and invocation is not None:
        return await _start_prompt_run(
            conversation_id,
            text,
            invocation,
            user_id=user_id,
            client=client,
            executor=executor,
            auto_answer=auto_answer,
            attachments=attachments,
            within_limits=within_limits,
            prepare=prepare,
        )
    run, events = await sync_to_async(_create_run)(
        conversation_id,
        text,
        client,
        inline=executor.inline,
        retry=retry,
        user_id=user_id,
        auto_answer=auto_answer,
        attachments=attachments,
        within_limits=within_limits,
        prepare=prepare,
    )
    await broadcast.broadcast_events(events)
    await executor.submit(run, user_id=user_id, client=client, auto_answer=auto_answer)
    return run


async def start_runs(
    conversations: Callable[[], Sequence[int]], text: str, *, user_id: int
) -> list[Run]:
    """Create conversations (`conversations()`, called in the transaction) and start a run of the
    same message in each, within the person's limits: one check for all of them, and either all
    start or none does and nothing is created (RunError, LimitRefusal for a limit). The message
    is sent as typed (an MCP prompt command is not asked of its server)."""
    client = model_client()
    executor = get_executor()
    started = await sync_to_async(_create_runs)(
        conversations, text, client, inline=executor.inline, user_id=user_id
    )
    await broadcast.broadcast_events([event for _run, events in started for event in events])
    for run, _events in started:
        await executor.submit(run, user_id=user_id, client=client, auto_answer=None)
    return [run for run, _events in started]


async def _prompt_invocation(text: str, user_id: int) -> mcp_prompts.Invocation | None:
    """The MCP server's prompt `/mcp__server__prompt args` invokes, checked but not yet asked
    for; None for any other message; RunError when it cannot be given."""
    if not text.lstrip().startswith("/mcp__"):
        return None
    try:
        return await mcp_prompts.resolve(
            text, user_id=user_id, group_ids=await sync_to_async(user_groups)(user_id)
        )
    except mcp_prompts.PromptError as exc:
        raise RunError(str(exc)) from None


async def _start_prompt_run(
    conversation_id: int,
    typed: str,
    invocation: mcp_prompts.Invocation,
    *,
    user_id: int,
    client: ModelClient,
    executor: Executor,
    auto_answer: str | None,
    attachments: Sequence[int],
    within_limits: int | None,
    prepare: Prepare | None,
) -> Run:
    """`start_run` for an MCP prompt command: the run is admitted and created first (the one
    check of the limits), held by this process without a message while the server is asked, so
    no server is asked for a person past their limits; then the turn is stored and the run
    handed to the executor, `prepare` made in the same transaction. When the server cannot give
    the prompt, or a stop comes meanwhile, the run ends failed or stopped with no message and
    nothing else changed (RunError says why)."""
    run, events = await sync_to_async(_create_run)(
        conversation_id,
        None,
        client,
        inline=True,
        retry=False,
        user_id=user_id,
        auto_answer=auto_answer,
        within_limits=within_limits,
    )
    await broadcast.broadcast_events(events)
    asking = asyncio.get_running_loop().create_task(
        _prompt_turn(conversation_id, invocation, user_id)
    )
    # Beaten like an executing run (no other process takes it for dead), and a stop or an
    # interruption from elsewhere cancels the asking.
    heartbeats().add(run.pk, asking)
    try:
        text = await asking
        run, events = await sync_to_async(_store_turn)(
            run.pk,
            text,
            typed,
            user_id,
            attachments,
            inline=executor.inline,
            prepare=prepare,
        )
    except BaseException as exc:
        stopped = isinstance(exc, asyncio.CancelledError) and asking.cancelled()
        current = asyncio.current_task()
        if stopped and (current is None or not current.cancelling()):
            # A stop (or an interruption) from elsewhere cancelled the asking, not our caller.
            await _give_back(run.pk, Run.STOPPED, STOPPED_ASKING)
            raise RunError(STOPPED_ASKING) from None
        said = str(exc) if isinstance(exc, RunError) else "The prompt could not be given."
        await asyncio.shield(_give_back(run.pk, Run.FAILED, said))
        raise
    finally:
        heartbeats().discard(run.pk)
        tasks.ABANDONED.discard(run.pk)
    await broadcast.broadcast_events(events)
    await executor.submit(run, user_id=user_id, client=client, auto_answer=auto_answer)
    return run


async def _prompt_turn(
    conversation_id: int, invocation: mcp_prompts.Invocation, user_id: int
) -> str:
    """The person's turn: the MCP server's prompt, filtered like a tool's result (RunError when
    the server cannot give it)."""
    outbound = functools.partial(visibility.outbound, conversation_id, can_inspect=False)
    try:
        return await mcp_prompts.ask(
            invocation,
            user_id=user_id,
            conversation_id=conversation_id,
            inbound=lambda given: str(outbound().text(given)),
            preview=functools.partial(visibility.mcp_call_preview, conversation_id),
        )
    except mcp_prompts.PromptError as exc:
        raise RunError(str(exc)) from None


def _store_turn(
    run_id: int,
    prompt: str,
    typed: str,
    user_id: int,
    attachments: Sequence[int],
    *,
    inline: bool,
    prepare: Prepare | None,
) -> tuple[Run, list[RunEvent]]:
    """The held run's message (and files), stored now after `prepare`; a worker's run joins the
    queue."""
    with transaction.atomic():
        run = Run.objects.select_for_update().select_related("conversation").get(pk=run_id)
        if run.status != Run.RUNNING:
            raise RunError(
                "Your message was not sent: the answer was stopped or interrupted while the "
                "MCP server was asked for its prompt. Send it again."
            )
        conversation = run.conversation
        events = list(prepare()) if prepare is not None else []
        events.extend(_store_attachments(conversation, run, user_id, attachments))
        events.append(_store_prompt(conversation, run, prompt, typed))
        run.prompt = prompt
        if not inline:
            run.status, run.worker, run.heartbeat_at = Run.QUEUED, "", None
            events.append(
                eventlog.append_event(conversation.pk, RunQueued(run_id=run.pk), run_id=run.pk)
            )
        run.save(update_fields=["prompt", "status", "worker", "heartbeat_at"])
        return run, events


STOPPED_ASKING = "Stopped before the MCP server gave its prompt: nothing was sent."


async def _give_back(run_id: int, status: str, error: str) -> None:
    """End a held run that got no message (it never executed; the audit keeps it, as every run)."""
    await Run.objects.filter(pk=run_id, status=Run.RUNNING, prompt="").aupdate(
        status=status, error=error, finished_at=timezone.now(), heartbeat_at=None
    )


class Executor(Protocol):
    """Where runs execute: a strategy chosen by RUN_EXECUTOR."""

    inline: ClassVar[bool]

    async def submit(
        self, run: Run, *, user_id: int, client: ModelClient, auto_answer: str | None
    ) -> None: ...


class InlineExecutor:
    """Runs execute as tasks of the process that started them."""

    inline: ClassVar[bool] = True

    async def submit(
        self, run: Run, *, user_id: int, client: ModelClient, auto_answer: str | None
    ) -> None:
        spawn_run(run.pk, user_id=user_id, client=client, auto_answer=auto_answer)


class WorkerExecutor:
    """Runs wait in the queue until a worker claims them; a wake-up tells the workers at once."""

    inline: ClassVar[bool] = False

    async def submit(
        self, run: Run, *, user_id: int, client: ModelClient, auto_answer: str | None
    ) -> None:
        await wake_workers(run.pk)


EXECUTORS: dict[str, type[Executor]] = {"inline": InlineExecutor, "worker": WorkerExecutor}


def get_executor() -> Executor:
    return EXECUTORS[settings.RUN_EXECUTOR]()


def spawn_run(
    run_id: int,
    *,
    user_id: int,
    client: ModelClient | None = None,
    auto_answer: str | None = None,
    heartbeat: bool = True,
) -> asyncio.Task[RunOutcome | None]:
    """Execute a claimed run as a task of this event loop, with its heartbeat beside it.

    The task is the run's task group: the run, then its after-work (`tasks`). A worker passes
    `heartbeat=False`: it beats for all its runs at once (`workers`).
    """
    # A fresh context: a run outlives the request or socket that started it, so it must not
    # inherit their thread-sensitive executor (it is shut down when they end).
    task = asyncio.get_running_loop().create_task(
        _supervised(
            run_id, user_id=user_id, client=client, auto_answer=auto_answer, heartbeat=heartbeat
        ),
        context=contextvars.Context(),
    )
    tasks.open_group(jobs.RUNS, run_id, task)
    return task


async def _supervised(
    run_id: int,
    *,
    user_id: int,
    client: ModelClient | None,
    auto_answer: str | None,
    heartbeat: bool,
) -> RunOutcome | None:
    task = asyncio.current_task()
    assert task is not None
    if heartbeat:
        heartbeats().add(run_id, task)
    try:
        return await execute_run(run_id, user_id=user_id, client=client, auto_answer=auto_answer)
    finally:
        if heartbeat:
            heartbeats().discard(run_id)
        abandoned = run_id in tasks.ABANDONED
        tasks.ABANDONED.discard(run_id)
        # The run itself is over: a stop stops waiting here, and cannot cancel what follows.
        tasks.executed(jobs.RUNS, run_id)
        if not abandoned:
            # In the run's own task: whoever waits for the run waits for these too, and
            # whoever gives the run up (a worker stopping) cancels them with it.
            await _after_run(run_id)


async def _after_run(run_id: int) -> None:
    """Send the conversation's next queued message (a policy of runs), then tell the subscribers
    handed to runs (`wiring.after_run`) that the run has ended."""
    row = (
        await Run.objects.filter(pk=run_id)
        .values("conversation_id", "parent_id", "status", "error", "error_kind")
        .afirst()
    )
    if row is None or row["parent_id"] is not None:
        return  # gone, or a subagent's run: its parent's end is the one that counts
    finished = RunFinished(
        run_id=run_id, status=row["status"], error=row["error"], kind=row["error_kind"]
    )
    try:
        # Started while the subscribers (the title) do their work.
        await pending.send_next(row["conversation_id"], start=start_run)
    except Exception:
        logger.exception("after run %s: sending the next queued message failed", run_id)
    for subscriber in wiring.current().after_run:
        try:
            await subscriber(row["conversation_id"], finished)
        except Exception:
            logger.exception("after run %s: %r failed", run_id, subscriber)


def heartbeats() -> jobs.Heartbeats:
    """This event loop's heartbeats of inline runs (tests run a loop each; a server runs one)."""
    return jobs.heartbeats(jobs.RUNS, follow)


def follow(run_id: int, task: asyncio.Task[Any], status: str | None, stop: bool) -> bool:
    """Act on a run's row as a heartbeat read it; False once nothing is left to keep alive."""
    if status == Run.INTERRUPTED:
        logger.warning("run %s was marked interrupted elsewhere; abandoning it", run_id)
        tasks.ABANDONED.add(run_id)
        task.cancel()
        return False
    if status in Run.ACTIVE and stop:
        task.cancel()
        return False
    # Finished by execute_run itself (or gone): nothing to keep alive.
    return status in Run.ACTIVE
