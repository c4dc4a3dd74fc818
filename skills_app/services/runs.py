"""Agent runs on the Django side: start and stop them, persist what they produce, broadcast events.

Data flows one way: `start_run` -> `core.agent.Agent` (events out) -> `RunRecorder` persists rows
and RunEvents and broadcasts to the conversation's channel-layer group.

Where a run executes depends on RUN_EXECUTOR: "inline" runs it as a task of the process that
started it; "worker" sends it to the `skillscope-runs` channel, where a Channels worker
(`skills_app.workers`) executes it. Either way the executing process touches `Run.heartbeat_at`
every RUN_HEARTBEAT_SECONDS, so a run whose process died is recognised (its heartbeat goes stale)
and marked interrupted, with its history left valid for the API and a Retry for the user.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import socket
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.module_loading import import_string

from ..core.agent import Agent, AgentEvent, RunOutcome, TurnState
from ..core.hooks import HookResult, Hooks
from ..core.llm import ModelClient, make_model_client
from ..core.permissions import Decision, ToolCall, decide
from ..core.skillfile import SkillSpec
from ..core.skillhooks import skill_hooks_from_rows
from ..core.tools import ToolContext, default_tools
from ..core.tools.workspace import Workspace
from ..core.transcript import StoredMessage
from ..models import Approval, Conversation, Message, Run, RunEvent, SkillInvocation
from . import forks, store
from .approvals import PermissionGate

logger = logging.getLogger(__name__)

# Text deltas are written and broadcast in batches: one RunEvent per flush, not per delta.
DELTA_FLUSH_SECONDS = 0.03

# The channel Channels workers listen on (`manage.py runworker skillscope-runs`).
RUN_CHANNEL = "skillscope-runs"
# How long a stop waits for a run executing in another process to finish.
STOP_WAIT_SECONDS = 10.0
INTERRUPTED_MESSAGE = (
    "The server process running this answer stopped before it finished. Retry to continue."
)

# run id -> asyncio task, for runs started inline by this process.
_TASKS: dict[int, asyncio.Task[Any]] = {}
# Runs executing here that another process already marked interrupted (their heartbeat looked
# dead): their history is closed, so whatever they still produce is dropped, not stored.
_ABANDONED: set[int] = set()

_client_override: ModelClient | None = None


class RunError(Exception):
    """A run cannot start; the message says why and what to do."""


def set_model_client(client: ModelClient | None) -> None:
    """Use this client for every run (tests and the comparison page); None restores the default."""
    global _client_override
    _client_override = client


def model_client() -> ModelClient:
    if _client_override is not None:
        return _client_override
    return make_model_client(
        api_key=settings.ANTHROPIC_API_KEY,
        base_url=settings.ANTHROPIC_BASE_URL or None,
        model=settings.ANTHROPIC_MODEL,
        max_retries=settings.ANTHROPIC_MAX_RETRIES,
        timeout=settings.ANTHROPIC_TIMEOUT,
    )


def workspace_for(conversation_id: int) -> Workspace:
    return Workspace.for_conversation(settings.WORKSPACE_ROOT, conversation_id)


def settings_hooks() -> Hooks:
    """Hooks configured by dotted paths in settings.AGENT_HOOKS."""
    hooks = Hooks()
    for event, paths in settings.AGENT_HOOKS.items():
        for path in paths:
            hooks.add(event, import_string(path))
    return hooks


@dataclass(slots=True)
class RunRecorder:
    """Receives the agent's events: stores rows and RunEvents, broadcasts, writes the audit."""

    conversation_id: int
    run_id: int
    user_id: int
    _buffer: list[dict[str, Any]] = field(default_factory=list)
    _last_flush: float = 0.0
    _flush_task: asyncio.Task[Any] | None = None
    gate: PermissionGate | None = None

    async def __call__(self, event: AgentEvent) -> Any:
        if self.run_id in _ABANDONED:
            return None
        if event.type == "text.delta":
            self._buffer.append(event.data)
            if time.monotonic() - self._last_flush >= DELTA_FLUSH_SECONDS:
                await self.flush()
            elif self._flush_task is None or self._flush_task.done():
                self._flush_task = asyncio.ensure_future(self._flush_later())
            return None
        await self.flush()
        handler = getattr(self, "on_" + event.type.replace(".", "_"), None)
        if handler is None:
            return await self.record(event.type, _jsonable(event.data))
        return await handler(event.data)

    async def _flush_later(self) -> None:
        await asyncio.sleep(DELTA_FLUSH_SECONDS)
        await self.flush()

    async def flush(self) -> None:
        if not self._buffer:
            return
        pending, self._buffer = self._buffer, []
        self._last_flush = time.monotonic()
        # Merge consecutive deltas of the same block into one event.
        merged: list[dict[str, Any]] = []
        for delta in pending:
            if merged and merged[-1]["index"] == delta["index"]:
                merged[-1]["text"] += delta["text"]
            else:
                merged.append({"index": delta["index"], "text": delta["text"]})
        for item in merged:
            await self.record("text.delta", item)

    async def record(self, type: str, data: dict[str, Any], *, hidden: bool = False) -> int:
        if self.run_id in _ABANDONED:
            return 0
        event = await sync_to_async(store.append_event)(
            self.conversation_id, type, data, run_id=self.run_id, hidden=hidden
        )
        await broadcast(self.conversation_id, event.seq, type, data, hidden=hidden)
        return event.seq

    async def on_message(self, data: dict[str, Any]) -> int:
        message: StoredMessage = data["message"]
        invocation = data.get("invocation")
        row = await sync_to_async(store.append_message)(
            self.conversation_id, message, run_id=self.run_id, invocation_id=invocation
        )
        if message.role == "assistant" and data.get("usage"):
            await sync_to_async(_add_usage)(self.run_id, data["usage"])
        await self.record(
            "message",
            {
                "message_id": row.pk,
                "seq": row.seq,
                "role": row.role,
                "kind": row.kind,
                "is_meta": row.is_meta,
            },
            hidden=row.is_meta,
        )
        return row.pk

    async def on_model_call(self, data: dict[str, Any]) -> int:
        request = data["request"]
        await sync_to_async(_note_request)(self.run_id, data["call"], request.model)
        return await self.record("model.call", {"call": data["call"], "model": request.model})

    async def on_skill_invocation(self, data: dict[str, Any]) -> int:
        # The row itself is written by the audit hook; subscribers only learn that it happened.
        return await self.record(
            "skill.invocation",
            {
                "skill": data.get("skill", ""),
                "caller": data.get("caller", ""),
                "decision": data.get("decision", ""),
                "args": data.get("args", ""),
                "error": data.get("error", ""),
                "tool_use_id": data.get("tool_use_id", ""),
            },
        )

    async def on_tool_result(self, data: dict[str, Any]) -> int:
        content = str(data.get("content", ""))
        public = {**_jsonable(data), "content": content[:4000]}
        return await self.record("tool.result", public)

    # -- hooks: the audit writer ------------------------------------------------------------

    async def audit_skill(self, data: dict[str, Any]) -> HookResult:
        if self.gate is not None and self.gate.last_approval_id is not None:
            data = {**data, "approval": self.gate.last_approval_id}
        invocation_id = await sync_to_async(_write_invocation)(
            self.conversation_id, self.run_id, data
        )
        return HookResult(value=invocation_id)

    async def audit_tool(self, data: dict[str, Any]) -> None:
        if data.get("invocation") is None:
            return None
        result = data.get("result")
        decision = data.get("decision")
        await sync_to_async(_append_tool_audit)(
            data["invocation"],
            {
                "tool_use_id": data.get("tool_use_id"),
                "tool": data.get("tool_name"),
                "input": _jsonable(data.get("tool_input") or {}),
                "is_error": bool(getattr(result, "is_error", False)),
                "decision": getattr(decision, "behavior", None),
                "reason": getattr(decision, "reason", None),
            },
        )
        return None


def _write_invocation(conversation_id: int, run_id: int, data: dict[str, Any]) -> int:
    from .uploads import version_for_digest

    approval = data.get("approval")
    row = SkillInvocation.objects.create(
        conversation_id=conversation_id,
        run_id=run_id,
        skill=data.get("skill", ""),
        source=data.get("source", ""),
        digest=data.get("digest", ""),
        version=version_for_digest(data.get("skill", ""), data.get("digest", "")),
        caller=data.get("caller", "model"),
        args=data.get("args", ""),
        tool_use_id=data.get("tool_use_id", ""),
        decision=data.get("decision", ""),
        decided_by=(data.get("decided_by") or data.get("error_code") or "")[:300],
        error_code=data.get("error_code", ""),
        error=data.get("error", ""),
        approval_id=approval,
        status_text=data.get("status_text", ""),
        injected_text=data.get("injected_text", ""),
        allowed_tools=data.get("allowed_tools", []),
        disallowed_tools=data.get("disallowed_tools", []),
        model_override=data.get("model_override", ""),
        already_loaded=bool(data.get("already_loaded")),
        shell_commands=_jsonable(data.get("shell_commands", [])),
        hooks=_jsonable(data.get("hooks", [])),
    )
    return row.pk


def _stored_skill_hooks(conversation_id: int, skills: Any) -> list[Any]:
    """Hooks registered by earlier invocations in this conversation, for skills still offered."""
    stored = SkillInvocation.objects.filter(
        conversation_id=conversation_id, decision="allowed"
    ).order_by("pk")
    hooks = skill_hooks_from_rows(stored.values_list("hooks", flat=True))
    return [h for h in hooks if skills.get(h.skill) is not None]


def _append_tool_audit(invocation_id: int, entry: dict[str, Any]) -> None:
    """Record a tool call made while a skill's turn was active, linked to that invocation."""
    ids = (
        SkillInvocation.objects.filter(pk=invocation_id)
        .values_list("conversation_id", "run_id")
        .first()
    )
    if ids:
        store.append_event(
            ids[0], "audit.tool", {**entry, "invocation_id": invocation_id}, run_id=ids[1]
        )


def _add_usage(run_id: int, usage: dict[str, Any]) -> None:
    run = Run.objects.get(pk=run_id)
    total = dict(run.usage or {})
    for key, value in usage.items():
        if isinstance(value, int):
            total[key] = total.get(key, 0) + value
    run.usage = total
    run.save(update_fields=["usage"])


def _note_request(run_id: int, call: int, model: str) -> None:
    run = Run.objects.get(pk=run_id)
    run.requests = [*run.requests, {"call": call, "model": model, "at": timezone.now().isoformat()}]
    run.model_calls = call
    run.save(update_fields=["requests", "model_calls"])


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)


async def broadcast(
    conversation_id: int, seq: int, type: str, data: dict[str, Any], *, hidden: bool = False
) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    await layer.group_send(
        store.group_name(conversation_id),
        {"type": "run.event", "seq": seq, "event_type": type, "data": data, "hidden": hidden},
    )


# -- starting and stopping --------------------------------------------------------------------


def process_identity() -> str:
    """How this process is named in `Run.worker`: host and pid."""
    return f"{socket.gethostname()} pid {os.getpid()}"


def _create_run(
    conversation_id: int, user_id: int, client: ModelClient, *, inline: bool
) -> tuple[Run, list[RunEvent]]:
    """The new Run row, plus the events of an orphaned run it replaced (to broadcast)."""
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(pk=conversation_id)
        events: list[RunEvent] = []
        for active in conversation.runs.filter(status__in=Run.ACTIVE).values_list("pk", flat=True):
            # A run whose process died does not block the conversation forever.
            if not _executing_here(active):
                events.extend(_interrupt(active, stale_before=_stale_cutoff()))
        if conversation.runs.filter(status__in=Run.ACTIVE).exists():
            raise RunError(
                "A run is already in progress in this conversation. Wait for it or stop it first."
            )
        run = Run.objects.create(
            conversation=conversation,
            model=conversation.model or client.model,
            model_label=client.label,
            is_demo=client.is_demo,
            # An inline run is executing from now on; a worker run gets these when a worker claims it.
            worker=process_identity() if inline else "",
            heartbeat_at=timezone.now() if inline else None,
        )
        return run, events


async def start_run(
    conversation_id: int,
    text: str | None,
    *,
    user_id: int,
    auto_answer: str | None = None,
) -> Run:
    """Create a run and execute it: a task here (RUN_EXECUTOR=inline) or in a Channels worker."""
    client = model_client()
    inline = settings.RUN_EXECUTOR != "worker"
    run, events = await sync_to_async(_create_run)(conversation_id, user_id, client, inline=inline)
    await broadcast_events(events)
    if not inline:
        await _send_to_worker(run, text, user_id=user_id, auto_answer=auto_answer)
        return run
    task = spawn_run(run.pk, text, user_id=user_id, client=client, auto_answer=auto_answer)
    _TASKS[run.pk] = task
    task.add_done_callback(lambda _t, pk=run.pk: _TASKS.pop(pk, None))
    return run


async def _send_to_worker(
    run: Run, text: str | None, *, user_id: int, auto_answer: str | None
) -> None:
    layer = get_channel_layer()
    message = {
        "type": "run.execute",
        "run_id": run.pk,
        "text": text,
        "user_id": user_id,
        "auto_answer": auto_answer,
    }
    try:
        if layer is None:
            raise RuntimeError("no channel layer is configured")
        await layer.send(RUN_CHANNEL, message)
    except Exception as exc:
        logger.exception("could not hand run %s to a worker", run.pk)
        error = f"The run could not be handed to a worker ({exc}). Try again in a moment."
        await Run.objects.filter(pk=run.pk).aupdate(
            status=Run.FAILED, error=error, error_kind="dispatch", finished_at=timezone.now()
        )
        raise RunError(error) from exc


def spawn_run(
    run_id: int,
    text: str | None,
    *,
    user_id: int,
    client: ModelClient | None = None,
    auto_answer: str | None = None,
) -> asyncio.Task[RunOutcome | None]:
    """Execute a claimed run as a task of this event loop, with its heartbeat beside it."""
    # A fresh context: a run outlives the request or socket that started it, so it must not
    # inherit their thread-sensitive executor (it is shut down when they end).
    return asyncio.get_running_loop().create_task(
        _supervised(run_id, text, user_id=user_id, client=client, auto_answer=auto_answer),
        context=contextvars.Context(),
    )


async def _supervised(
    run_id: int,
    text: str | None,
    *,
    user_id: int,
    client: ModelClient | None,
    auto_answer: str | None,
) -> RunOutcome | None:
    task = asyncio.current_task()
    assert task is not None
    beat = asyncio.ensure_future(_heartbeat(run_id, task))
    try:
        return await execute_run(
            run_id, text, user_id=user_id, client=client, auto_answer=auto_answer
        )
    finally:
        beat.cancel()
        _ABANDONED.discard(run_id)


async def _heartbeat(run_id: int, task: asyncio.Task[Any]) -> None:
    """Touch the run's heartbeat; cancel the run when a stop was asked or it was finished elsewhere."""
    while True:
        try:
            status, stop = await sync_to_async(_beat)(run_id)
        except Exception:
            # A database hiccup must not kill a live run; the next beat tries again.
            logger.exception("heartbeat of run %s failed", run_id)
        else:
            if status == Run.INTERRUPTED:
                logger.warning("run %s was marked interrupted elsewhere; abandoning it", run_id)
                _ABANDONED.add(run_id)
                task.cancel()
                return
            if status in Run.ACTIVE and stop:
                task.cancel()
                return
            if status not in Run.ACTIVE:
                return  # finished by execute_run itself: nothing to keep alive
        await asyncio.sleep(settings.RUN_HEARTBEAT_SECONDS)


def _beat(run_id: int) -> tuple[str | None, bool]:
    Run.objects.filter(pk=run_id, status__in=Run.ACTIVE).update(heartbeat_at=timezone.now())
    row = Run.objects.filter(pk=run_id).values_list("status", "stop_requested").first()
    return (row[0], row[1]) if row else (None, False)


def claim_run(run_id: int, *, channel: str) -> bool:
    """Take a queued run for this worker; False when another took it or it already ended."""
    return bool(
        Run.objects.filter(pk=run_id, status=Run.RUNNING, channel="", heartbeat_at=None).update(
            worker=process_identity(), channel=channel, heartbeat_at=timezone.now()
        )
    )


async def execute_run(
    run_id: int,
    text: str | None,
    *,
    user_id: int,
    client: ModelClient | None = None,
    auto_answer: str | None = None,
) -> RunOutcome | None:
    """Run the agent loop for an existing Run row to completion, recording everything."""
    client = client or model_client()
    run = await Run.objects.select_related("conversation").aget(pk=run_id)
    conversation = run.conversation
    recorder = RunRecorder(conversation.pk, run.pk, user_id)
    workspace = await sync_to_async(workspace_for)(conversation.pk)
    hooks = await sync_to_async(settings_hooks)()
    hooks.add("SkillInvocation", recorder.audit_skill)
    hooks.add("PostToolUse", recorder.audit_tool)
    gate = PermissionGate(
        conversation_id=conversation.pk,
        run_id=run.pk,
        user_id=user_id,
        workspace=workspace,
        record=recorder.record,
        auto_answer=auto_answer,
    )
    recorder.gate = gate
    # It reads the database (personal uploads), which async code may not do directly.
    registry = await sync_to_async(store.skills_for_conversation)(conversation)

    async def stage(spec: SkillSpec) -> str:
        return str(await sync_to_async(workspace.stage_skill)(spec.name, spec.path, spec.digest))

    async def check(call: ToolCall, state: TurnState) -> Decision:
        # The rules alone, never an approval: for `!` commands and skill hooks.
        return decide(call, await sync_to_async(gate.context)(state))

    tools = default_tools()
    # A bare admin deny (e.g. "Bash") removes the tool from the request altogether.
    removed = await sync_to_async(gate.removed_tools)([*tools.names(), "Skill"])
    agent = Agent(
        client=client,
        tools=tools.without(removed),
        tool_context=ToolContext(
            workspace=workspace,
            sandbox=settings.SANDBOX,
            bash_timeout_default=settings.BASH_TIMEOUT_DEFAULT,
            bash_timeout_max=settings.BASH_TIMEOUT_MAX,
            output_limit=settings.BASH_OUTPUT_LIMIT,
        ),
        skills=registry,
        decide=gate.decide,
        emit=recorder,
        stage_skill=stage,
        config=await sync_to_async(store.agent_config)(conversation, model=run.model or None),
        hooks=hooks,
        check=check,
    )
    # Skills with `context: fork` run as subagents in child runs of this one.
    agent.fork = forks.make_fork(
        conversation_id=conversation.pk,
        parent_run_id=run.pk,
        user_id=user_id,
        client=client,
        tool_context=agent.tool_context,
        skills=registry,
        config=agent.config,
        recorder_factory=lambda child_id: RunRecorder(conversation.pk, child_id, user_id),
        stage_skill=stage,
        check=check,
    )
    agent.config = replace(agent.config, disable_skill_shell=settings.DISABLE_SKILL_SHELL)
    agent.register_skill_hooks(await sync_to_async(_stored_skill_hooks)(conversation.pk, registry))
    agent.state.disallowed_tools.update(removed)
    rows = await sync_to_async(store.history)(conversation)
    await recorder.record(
        "run.started",
        {"run_id": run.pk, "model": run.model, "label": run.model_label, "demo": run.is_demo},
    )
    status, error, kind = Run.DONE, "", ""
    outcome: RunOutcome | None = None
    try:
        outcome = await agent.run(rows, text)
        if outcome.status == "failed":
            status, error, kind = Run.FAILED, outcome.error, outcome.error_kind
    except asyncio.CancelledError:
        status, error, kind = Run.STOPPED, "Stopped by the user.", "stopped"
        await recorder.flush()
        await _finish(run.pk, recorder, status, error, kind)
        raise
    except Exception as exc:
        logger.exception("run %s failed", run.pk)
        status, error, kind = Run.FAILED, f"The run failed unexpectedly: {exc}", "internal"
        try:
            await agent._notice("error", error, code="internal")
        except Exception:
            logger.exception("could not record the failure of run %s", run.pk)
    await recorder.flush()
    await _finish(run.pk, recorder, status, error, kind)
    return outcome


async def _finish(run_id: int, recorder: RunRecorder, status: str, error: str, kind: str) -> None:
    finished = await Run.objects.filter(pk=run_id, status__in=Run.ACTIVE).aupdate(
        status=status, error=error, error_kind=kind, finished_at=timezone.now()
    )
    if not finished:
        # Another process already marked it interrupted (its heartbeat looked dead); keep that.
        logger.warning(
            "run %s had already been finished elsewhere; not marking it %s", run_id, status
        )
        return
    await recorder.record(
        "run.finished", {"run_id": run_id, "status": status, "error": error, "kind": kind}
    )


async def stop_run(run_id: int) -> bool:
    """Stop a run wherever it executes; the partial answer is kept. False when it could not be."""
    task = _TASKS.get(run_id)
    if task is not None and not task.done():
        task.cancel()
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout=STOP_WAIT_SECONDS)
        except (asyncio.CancelledError, TimeoutError):
            pass
        except Exception:
            logger.exception("run %s raised while stopping", run_id)
        return True
    return await _stop_elsewhere(run_id)


async def _stop_elsewhere(run_id: int) -> bool:
    """Stop a run another process executes: ask it directly and by flag, then wait for the row."""
    run = await Run.objects.filter(pk=run_id, status__in=Run.ACTIVE).afirst()
    if run is None:
        return False
    events = await sync_to_async(_stop_unclaimed)(run_id)
    if not events:
        events = await sync_to_async(_interrupt)(run_id, stale_before=_stale_cutoff())
    if events:
        await broadcast_events(events)
        return True
    await Run.objects.filter(pk=run_id, status__in=Run.ACTIVE).aupdate(stop_requested=True)
    layer = get_channel_layer()
    if run.channel and layer is not None:
        try:
            await layer.send(run.channel, {"type": "run.stop", "run_id": run_id})
        except Exception:
            # The flag still reaches the worker with its next heartbeat.
            logger.exception("could not send the stop of run %s to %s", run_id, run.channel)
    deadline = time.monotonic() + STOP_WAIT_SECONDS + settings.RUN_HEARTBEAT_SECONDS
    while time.monotonic() < deadline:
        if not await Run.objects.filter(pk=run_id, status__in=Run.ACTIVE).aexists():
            return True
        await asyncio.sleep(0.1)
    return False


def _stop_unclaimed(run_id: int) -> list[RunEvent]:
    """Stop a run still waiting for a worker: it never started, so only its status changes."""
    with transaction.atomic():
        stopped = Run.objects.filter(
            pk=run_id, status=Run.RUNNING, channel="", heartbeat_at=None
        ).update(
            status=Run.STOPPED,
            error="Stopped by the user.",
            error_kind="stopped",
            finished_at=timezone.now(),
        )
        if not stopped:
            return []
        conversation_id = Run.objects.values_list("conversation_id", flat=True).get(pk=run_id)
        data = {"run_id": run_id, "status": Run.STOPPED, "error": "Stopped by the user."}
        return [
            store.append_event(
                conversation_id, "run.finished", {**data, "kind": "stopped"}, run_id=run_id
            )
        ]


async def wait_for_run(run_id: int, timeout: float | None = None) -> None:
    """Wait until the run has finished, here or in another process; TimeoutError after timeout."""
    task = _TASKS.get(run_id)
    if task is not None:
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout=timeout)
        except asyncio.CancelledError:
            if not task.cancelled():
                raise  # the waiter itself was cancelled
        return
    deadline = None if timeout is None else time.monotonic() + timeout
    while await Run.objects.filter(pk=run_id, status__in=Run.ACTIVE).aexists():
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeoutError(f"run {run_id} is still active after {timeout} s")
        await asyncio.sleep(0.05)


def visible_transcript(conversation: Conversation, *, after_seq: int = 0) -> list[Message]:
    """Rows a user without the inspect permission may see (never is_meta)."""
    return list(conversation.messages.filter(is_meta=False, seq__gt=after_seq).order_by("seq"))


# -- interrupted runs ---------------------------------------------------------------------------


def _stale_cutoff() -> datetime:
    return timezone.now() - timedelta(seconds=settings.RUN_STALE_SECONDS)


def _stale(cutoff: datetime) -> Q:
    # A run no worker ever claimed has no heartbeat: its age counts instead.
    return Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff)


def _executing_here(run_id: int) -> bool:
    task = _TASKS.get(run_id)
    return task is not None and not task.done()


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
        if _executing_here(run_id):
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
        if _executing_here(run_id):
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
    from ..core.transcript import INTERRUPTED_RESULT, tool_result_block, unanswered_tool_uses

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
            events.append(
                store.append_event(
                    conversation.pk,
                    "message",
                    {
                        "message_id": row.pk,
                        "seq": row.seq,
                        "role": row.role,
                        "kind": row.kind,
                        "is_meta": row.is_meta,
                    },
                    run_id=run.pk,
                    hidden=row.is_meta,
                )
            )

        open_uses = unanswered_tool_uses(store.history(conversation))
        if open_uses:
            add(
                StoredMessage(
                    role="user",
                    kind="tool_result",
                    content=tuple(
                        tool_result_block(b["id"], INTERRUPTED_RESULT, is_error=True)
                        for b in open_uses
                    ),
                )
            )
        partial = _streamed_text(run)
        if partial:
            add(StoredMessage(role="assistant", content=tuple(partial), meta={"partial": True}))
        add(
            StoredMessage.text(
                "assistant",
                INTERRUPTED_MESSAGE,
                kind="error",
                to_model=False,
                meta={"code": "interrupted"},
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


def _streamed_text(run: Run) -> list[dict[str, Any]]:
    """Text blocks the run streamed after its last stored message: the answer it was writing."""
    last = (
        RunEvent.objects.filter(run=run, type__in=("message", "model.call"))
        .order_by("-seq")
        .values_list("seq", flat=True)
        .first()
    ) or 0
    texts: dict[int, str] = {}
    for data in RunEvent.objects.filter(run=run, type="text.delta", seq__gt=last).values_list(
        "data", flat=True
    ):
        index = int(data.get("index", 0))
        texts[index] = texts.get(index, "") + str(data.get("text", ""))
    blocks = []
    for index in sorted(texts):
        text = texts[index].rstrip()
        if text.strip():
            blocks.append({"type": "text", "text": text})
    return blocks


async def broadcast_events(events: list[RunEvent]) -> None:
    """Send stored events to the subscribers of their conversations."""
    for event in events:
        await broadcast(
            event.conversation_id, event.seq, event.type, event.data, hidden=event.hidden
        )
