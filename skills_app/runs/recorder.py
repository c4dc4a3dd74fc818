"""The run recorder: stores what a run produces (rows, RunEvents, the audit) and broadcasts it.

Text deltas are coalesced: one RunEvent per flush (every DELTA_FLUSH_SECONDS), not per delta.
Everything a run stores goes through here, so a run that another process marked interrupted
(its history already closed) stores nothing more.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.utils import timezone

from skills_app.core.events import ModelCalled, RunEvent, TextDelta, ToolFinished
from skills_app.core.ports import InvocationRecord, ToolAudit
from skills_app.core.transcript import StoredMessage
from skills_app.models import Message, Run, SkillInvocation
from skills_app.runs import store, tasks
from skills_app.runs.broadcast import broadcast

# Text deltas are written and broadcast in batches: one RunEvent per flush, not per delta.
DELTA_FLUSH_SECONDS = 0.03
# Tool results are shown cut to this many characters in live events (the row keeps them whole).
LIVE_RESULT_CHARS = 4000


@dataclass(slots=True)
class RunRecorder:
    """Stores and broadcasts what one run produces."""

    conversation_id: int
    run_id: int
    user_id: int
    _buffer: list[TextDelta] = field(default_factory=list)
    _last_flush: float = 0.0
    _flush_task: asyncio.Task[Any] | None = None

    @property
    def abandoned(self) -> bool:
        return self.run_id in tasks.ABANDONED

    async def event(self, event: RunEvent) -> None:
        """Record and broadcast one event of the run (text deltas in batches)."""
        if self.abandoned:
            return
        if isinstance(event, TextDelta):
            self._buffer.append(event)
            if time.monotonic() - self._last_flush >= DELTA_FLUSH_SECONDS:
                await self.flush()
            elif self._flush_task is None or self._flush_task.done():
                self._flush_task = asyncio.ensure_future(self._flush_later())
            return
        await self.flush()
        data = event.data()
        if isinstance(event, ModelCalled):
            await sync_to_async(_note_request)(self.run_id, event.call, event.model)
        elif isinstance(event, ToolFinished):
            data["content"] = event.content[:LIVE_RESULT_CHARS]
        await self.record(event.type, data)

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
            if merged and merged[-1]["index"] == delta.index:
                merged[-1]["text"] += delta.text
            else:
                merged.append({"index": delta.index, "text": delta.text})
        for item in merged:
            await self.record(TextDelta.type, item)

    async def record(self, type: str, data: dict[str, Any], *, hidden: bool = False) -> int:
        """Append one event to the conversation's log and broadcast it; its seq (0: dropped)."""
        if self.abandoned:
            return 0
        event = await sync_to_async(store.append_event)(
            self.conversation_id, type, data, run_id=self.run_id, hidden=hidden
        )
        await broadcast(self.conversation_id, event.seq, type, data, hidden=hidden)
        return event.seq

    async def message(self, message: StoredMessage, invocation: int | None = None) -> None:
        """Store one message row and announce it."""
        if self.abandoned:
            return
        await self.flush()
        row = await sync_to_async(_store_message)(
            self.conversation_id, self.run_id, message, invocation
        )
        await self.record("message", store.message_event(row), hidden=row.is_meta)

    async def invocation(self, record: InvocationRecord) -> int | None:
        """Write the audit row of a skill invocation and announce that it happened."""
        if self.abandoned:
            return None
        await self.flush()
        invocation_id = await sync_to_async(_write_invocation)(
            self.conversation_id, self.run_id, record
        )
        # Subscribers learn the facts, never the injected text.
        public = {
            "skill": record.skill,
            "caller": record.caller,
            "decision": record.decision,
            "args": record.args,
            "error": record.error,
            "tool_use_id": record.tool_use_id,
        }
        await self.record("skill.invocation", public)
        return invocation_id

    async def tool_call(self, invocation: int, audit: ToolAudit) -> None:
        """Audit a tool call made under an invoked skill."""
        await self.record("audit.tool", {**asdict(audit), "invocation_id": invocation})


def _store_message(
    conversation_id: int, run_id: int, message: StoredMessage, invocation: int | None
) -> Message:
    row = store.append_message(conversation_id, message, run_id=run_id, invocation_id=invocation)
    usage = message.meta.get("usage") if message.role == "assistant" else None
    if usage:
        _add_usage(run_id, usage)
    return row


def _write_invocation(conversation_id: int, run_id: int, record: InvocationRecord) -> int:
    from skills_app.registry.uploads import version_for_digest

    row = SkillInvocation.objects.create(
        conversation_id=conversation_id,
        run_id=run_id,
        skill=record.skill,
        source=record.source,
        digest=record.digest,
        version=version_for_digest(record.skill, record.digest),
        caller=record.caller,
        args=record.args,
        tool_use_id=record.tool_use_id,
        decision=record.decision,
        decided_by=(record.decided_by or record.error_code)[:300],
        error_code=record.error_code,
        error=record.error,
        approval_id=record.approval_id,
        status_text=record.status_text,
        injected_text=record.injected_text,
        allowed_tools=list(record.allowed_tools),
        disallowed_tools=list(record.disallowed_tools),
        model_override=record.model_override,
        already_loaded=record.already_loaded,
        shell_commands=list(record.shell_commands),
        hooks=list(record.hooks),
    )
    return row.pk


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
