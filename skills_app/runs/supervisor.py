"""Starting and supervising runs (stopping, waiting for and giving them up: `runs.ending`).

Where a run executes depends on RUN_EXECUTOR: "inline" runs it as a task of the process that
started it; "worker" queues it (`runs.queue`: a database row, status `queued`) until a Channels
worker (`skills_app.runs.workers`) claims it. Either way the user's message is stored first, in
the transaction that creates the run. The executing process keeps `Run.heartbeat_at` fresh (every
RUN_HEARTBEAT_SECONDS: inline runs all at once per process, `Heartbeats`; a worker for all its
runs at once), so a run
whose process died is recognised and marked interrupted (`recovery`).
"""

from __future__ import annotations

import asyncio
import contextlib
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

from skills_app import visibility
from skills_app.core.agent import RunOutcome, SkillProvider
from skills_app.core.events import RunFinished, RunQueued
from skills_app.core.llm import ModelClient
from skills_app.core.profiles import slash_invokes
from skills_app.core.skilltool import parse_slash_command
from skills_app.core.transcript import StoredMessage
from skills_app.mcp import prompts as mcp_prompts
from skills_app.models import Conversation, Run, RunEvent
from skills_app.policy.access import user_groups
from skills_app.runs import agent_setup, attached, broadcast, eventlog, store, tasks, wiring
from skills_app.runs.client import model_client
from skills_app.runs.ending import drain, give_up, shutdown, stop_run, wait_for_run
from skills_app.runs.errors import RunError
from skills_app.runs.execute import execute_run
from skills_app.runs.liveness import process_identity
from skills_app.runs.queue import RUN_CHANNEL, wake_workers
from skills_app.runs.recovery import interrupt_if_orphaned

logger = logging.getLogger(__name__)

__all__ = [
    "RUN_CHANNEL",
    "RunError",
    "drain",
    "give_up",
    "process_identity",
    "shutdown",
    "start_run",
    "stop_run",
    "wait_for_run",
]


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
    admit: Callable[[int], None] | None = None,
) -> tuple[Run, list[RunEvent]]:
    """The new Run row, with the user's message stored at once, and the events to broadcast."""
    with transaction.atomic():
        if admit is not None:
            # The sending limits count this person's runs: checked under their lock, in the
            # transaction that creates the run, so parallel sends (other tabs, other processes)
            # cannot all pass on the same count. (SQLite's IMMEDIATE transactions serialise.)
            get_user_model().objects.select_for_update().filter(pk=user_id).first()
            admit(user_id)
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
            if not tasks.executing_here(active):
                events.extend(interrupt_if_orphaned(active))
        if conversation.runs.filter(status__in=Run.ACTIVE).exists():
            raise RunError(
                "A run is already in progress in this conversation. Wait for it or stop it first."
            )
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
            events.append(_store_prompt(conversation, run, prompt))
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


def _store_prompt(conversation: Conversation, run: Run, prompt: str) -> RunEvent:
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
    admit: Callable[[int], None] | None = None,
) -> Run:
    """Store the user's message, create a run and hand it to the configured executor.

    `attachments`: ids of pending files (`chat.attachments`) sent with the message.

    `admit(user_id)`: the sending limits (the chat's `check_send`), raising a RunError when the
    person may not start a run now; checked in the transaction that creates the run.

    `retry` answers the latest failed or refused turn again (its rows are sent to the model again,
    `transcript.retry_turn`) without storing the message a second time; RunError when there is
    nothing to retry.
    """
    if text is not None and not retry:
        text = await _prompt_turn(conversation_id, text, user_id) or text
    client = model_client()
    executor = get_executor()
    # One hop through the database thread creates the run and renders what it stored, announced
    # right after: under a burst of sends the caller does not queue a second time behind every
    # other caller's hops. (A worker may still take the run and announce its first event
    # sooner; the tab that sent it gets these at once anyway: `chat.consumers._relay_own`.)
    run, prepared = await sync_to_async(_create_and_prepare)(
        conversation_id,
        text,
        client,
        inline=executor.inline,
        retry=retry,
        user_id=user_id,
        auto_answer=auto_answer,
        attachments=attachments,
        admit=admit,
    )
    await broadcast.announce(prepared)
    await executor.submit(run, user_id=user_id, client=client, auto_answer=auto_answer)
    return run


async def _prompt_turn(conversation_id: int, text: str, user_id: int) -> str | None:
    """The person's turn for `/mcp__server__prompt args` (an MCP server's prompt, filtered like
    a tool's result), or None for any other message; RunError when it cannot be given."""
    if not text.lstrip().startswith("/mcp__"):
        return None
    outbound = functools.partial(visibility.outbound, conversation_id, can_inspect=False)
    try:
        return await mcp_prompts.expand(
            text,
            user_id=user_id,
            group_ids=await sync_to_async(user_groups)(user_id),
            conversation_id=conversation_id,
            inbound=lambda given: str(outbound().text(given)),
            preview=functools.partial(visibility.mcp_call_preview, conversation_id),
        )
    except mcp_prompts.PromptError as exc:
        raise RunError(str(exc)) from None


def _create_and_prepare(*args: Any, **kwargs: Any) -> tuple[Run, broadcast.Prepared]:
    run, events = _create_run(*args, **kwargs)
    return run, broadcast.prepare(events)


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
    tasks.open_group(run_id, task)
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
        tasks.executed(run_id)
        if not abandoned:
            # In the run's own task: whoever waits for the run waits for these too, and
            # whoever gives the run up (a worker stopping) cancels them with it.
            await _after_run(run_id)


async def _after_run(run_id: int) -> None:
    """Tell the subscribers handed to runs (`wiring.after_run`) that the run has ended."""
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
    for subscriber in wiring.current().after_run:
        try:
            await subscriber(row["conversation_id"], finished)
        except Exception:
            logger.exception("after run %s: %r failed", run_id, subscriber)


class Heartbeats:
    """The heartbeats of every inline run of this event loop: one UPDATE and one SELECT a beat.

    A task per run cost two statements and two thread hops per run every RUN_HEARTBEAT_SECONDS
    (40 statements a second at 100 runs), all competing with the live text for the interpreter
    lock. A run is beaten at once when it starts (with every other, which costs nothing more),
    then every RUN_HEARTBEAT_SECONDS; a stop asked or a run finished elsewhere is acted on as
    each run's own beat did (`follow`).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._runs: dict[int, asyncio.Task[Any]] = {}
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.beats = 0  # beats so far, each one UPDATE and one SELECT (tests, benchmarks)

    def add(self, run_id: int, task: asyncio.Task[Any]) -> None:
        self._runs[run_id] = task
        self._changed.set()
        if self._task is None or self._task.done():
            # A context of its own, as the runs have: it outlives whoever started the first run.
            self._task = self.loop.create_task(
                self._beat_while_runs(), context=contextvars.Context()
            )

    def idle(self) -> bool:
        """True when no run is beaten and the beating task has ended."""
        return not self._runs and (self._task is None or self._task.done())

    def discard(self, run_id: int) -> None:
        if self._runs.pop(run_id, None) is not None and not self._runs:
            self._changed.set()  # the beating task ends now rather than after its sleep

    async def _beat_while_runs(self) -> None:
        while self._runs:
            self._changed.clear()
            beaten = dict(self._runs)
            try:
                found = await sync_to_async(_beat)(list(beaten))
            except Exception:
                # A database hiccup must not kill a live run; the next beat tries again.
                logger.exception("heartbeat of runs %s failed", sorted(beaten))
            else:
                self.beats += 1
                for run_id, task in beaten.items():
                    status, stop = found.get(run_id, (None, False))
                    if self._runs.get(run_id) is task and not follow(run_id, task, status, stop):
                        del self._runs[run_id]
            if self._runs and not self._changed.is_set():
                # Woken early by a run starting (its first beat now) or the last one ending.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), settings.RUN_HEARTBEAT_SECONDS)


_HEARTBEATS: Heartbeats | None = None


def heartbeats() -> Heartbeats:
    """This event loop's heartbeats (tests run a loop each; a server runs one)."""
    global _HEARTBEATS
    loop = asyncio.get_running_loop()
    if _HEARTBEATS is None or _HEARTBEATS.loop is not loop:
        _HEARTBEATS = Heartbeats(loop)
    return _HEARTBEATS


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


def _beat(run_ids: list[int]) -> dict[int, tuple[str, bool]]:
    """Touch the heartbeats of these runs; each one's status and stop flag (absent: gone)."""
    executing = Run.objects.filter(pk__in=run_ids, status__in=Run.EXECUTING)
    executing.update(heartbeat_at=timezone.now())
    rows = Run.objects.filter(pk__in=run_ids).values_list("pk", "status", "stop_requested")
    return {pk: (status, stop) for pk, status, stop in rows}
