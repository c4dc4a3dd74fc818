"""The run recorder: receives the agent's events, stores rows and RunEvents, broadcasts them and
writes the audit. Text deltas are coalesced: one RunEvent per flush, not per delta."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.utils import timezone

from skills_app.core.agent import AgentEvent
from skills_app.core.hooks import HookResult
from skills_app.core.transcript import StoredMessage
from skills_app.models import Run, SkillInvocation
from skills_app.permissions.approvals import PermissionGate
from skills_app.runs import store, tasks
from skills_app.runs.broadcast import broadcast

logger = logging.getLogger(__name__)


# Text deltas are written and broadcast in batches: one RunEvent per flush, not per delta.
DELTA_FLUSH_SECONDS = 0.03


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
        if self.run_id in tasks.ABANDONED:
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
        if self.run_id in tasks.ABANDONED:
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
    from skills_app.registry.uploads import version_for_digest

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
