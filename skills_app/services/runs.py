"""Agent runs on the Django side: start and stop them, persist what they produce, broadcast events.

Data flows one way: `start_run` -> `core.agent.Agent` (events out) -> `RunRecorder` persists rows
and RunEvents and broadcasts to the conversation's channel-layer group.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from ..core.agent import Agent, AgentEvent, RunOutcome
from ..core.hooks import HookResult, Hooks
from ..core.llm import ModelClient, make_model_client
from ..core.skillfile import SkillSpec
from ..core.tools import ToolContext, default_tools
from ..core.tools.workspace import Workspace
from ..core.transcript import StoredMessage
from ..models import Conversation, Message, Run, SkillInvocation
from . import store
from .approvals import PermissionGate
from .skills import skills_for_user

logger = logging.getLogger(__name__)

# Text deltas are written and broadcast in batches: one RunEvent per flush, not per delta.
DELTA_FLUSH_SECONDS = 0.03

# run id -> asyncio task, for runs executing in this process.
_TASKS: dict[int, asyncio.Task[Any]] = {}

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
    )
    return row.pk


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


def _create_run(conversation_id: int, user_id: int, client: ModelClient) -> Run:
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(pk=conversation_id)
        if conversation.runs.filter(status__in=Run.ACTIVE).exists():
            raise RunError(
                "A run is already in progress in this conversation. Wait for it or stop it first."
            )
        return Run.objects.create(
            conversation=conversation,
            model=conversation.model or client.model,
            model_label=client.label,
            is_demo=client.is_demo,
        )


async def start_run(
    conversation_id: int,
    text: str | None,
    *,
    user_id: int,
    auto_answer: str | None = None,
) -> Run:
    """Create a run and execute it as a task in this event loop; returns the Run row."""
    client = model_client()
    run = await sync_to_async(_create_run)(conversation_id, user_id, client)
    task = asyncio.ensure_future(
        execute_run(run.pk, text, user_id=user_id, client=client, auto_answer=auto_answer)
    )
    _TASKS[run.pk] = task
    task.add_done_callback(lambda _t, pk=run.pk: _TASKS.pop(pk, None))
    return run


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
    registry = skills_for_user(user_id)

    async def stage(spec: SkillSpec) -> str:
        return str(await sync_to_async(workspace.stage_skill)(spec.name, spec.path, spec.digest))

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
    )
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
    await Run.objects.filter(pk=run_id).aupdate(
        status=status, error=error, error_kind=kind, finished_at=timezone.now()
    )
    await recorder.record(
        "run.finished", {"run_id": run_id, "status": status, "error": error, "kind": kind}
    )


async def stop_run(run_id: int) -> bool:
    """Stop a run: cancel its task if it runs here; the partial answer is kept."""
    task = _TASKS.get(run_id)
    if task is not None and not task.done():
        task.cancel()
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout=10)
        except (asyncio.CancelledError, TimeoutError):
            pass
        except Exception:
            logger.exception("run %s raised while stopping", run_id)
        return True
    return False


async def wait_for_run(run_id: int, timeout: float | None = None) -> None:
    task = _TASKS.get(run_id)
    if task is not None:
        await asyncio.wait_for(asyncio.shield(task), timeout=timeout)


def visible_transcript(conversation: Conversation, *, after_seq: int = 0) -> list[Message]:
    """Rows a user without the inspect permission may see (never is_meta)."""
    return list(conversation.messages.filter(is_meta=False, seq__gt=after_seq).order_by("seq"))


def interrupt_orphaned_runs() -> int:
    """Mark runs left active by a process that died as interrupted, keeping their history valid.

    Call it when no run can be executing (single-process start-up); returns how many were fixed.
    """
    from ..core.transcript import INTERRUPTED_RESULT, tool_result_block, unanswered_tool_uses
    from ..models import Approval

    fixed = 0
    for run in Run.objects.filter(status__in=Run.ACTIVE).select_related("conversation"):
        with transaction.atomic():
            conversation = run.conversation
            open_uses = unanswered_tool_uses(store.history(conversation))
            if open_uses:
                store.append_message(
                    conversation.pk,
                    StoredMessage(
                        role="user",
                        kind="tool_result",
                        content=tuple(
                            tool_result_block(b["id"], INTERRUPTED_RESULT, is_error=True)
                            for b in open_uses
                        ),
                    ),
                    run_id=run.pk,
                )
            message = "The server stopped while this run was active. Retry to continue."
            store.append_message(
                conversation.pk,
                StoredMessage.text(
                    "assistant", message, kind="error", to_model=False, meta={"code": "interrupted"}
                ),
                run_id=run.pk,
            )
            Approval.objects.filter(run=run, status=Approval.PENDING).update(
                status=Approval.CANCELLED, answered_at=timezone.now()
            )
            run.status = Run.INTERRUPTED
            run.error = message
            run.error_kind = "interrupted"
            run.finished_at = timezone.now()
            run.save(update_fields=["status", "error", "error_kind", "finished_at"])
            store.append_event(
                conversation.pk,
                "run.finished",
                {
                    "run_id": run.pk,
                    "status": Run.INTERRUPTED,
                    "error": message,
                    "kind": "interrupted",
                },
                run_id=run.pk,
            )
        fixed += 1
    return fixed
