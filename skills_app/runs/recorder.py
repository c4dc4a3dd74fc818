"""The run recorder: stores what a run produces (rows, events, the audit) and announces it.

Streamed text takes the live path (`streams`): straight to the conversation's group, coalesced,
and saved in batches by the process's stream saver. Everything else is stored first, in one
thread hop, and announced as data once its transaction committed (`broadcast.publish_on_commit`:
seq, type, data, and whether it is hidden); each tab's consumer renders it for its own viewer.
Before anything is stored the run's unsent text goes out, so a tab sees the stream end before
the row that replaces it.

Everything a run stores goes through here, so a run that another process marked interrupted
(its history already closed) stores nothing more.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from asgiref.sync import sync_to_async
from django.db import transaction
from django.utils import timezone

from skills_app.core.events import (
    BlockDone,
    BlockStarted,
    MessageStored,
    ModelCalled,
    RunEvent,
    SkillInvoked,
    TextDelta,
    ThinkingDelta,
    ToolAudited,
    ToolCalled,
    ToolFinished,
    event_from,
)
from skills_app.core.ports import InvocationRecord, ToolAudit
from skills_app.core.transcript import LIVE_RESULT_CHARS, StoredMessage
from skills_app.models import Run, SkillInvocation
from skills_app.runs import broadcast, eventlog, observers, store, tasks
from skills_app.runs.broadcast import send_live
from skills_app.runs.streams import RunStreams, journal
from skills_app.visibility import mcp_call_preview

# Blocks the browser shows a "Calling X…" line for while their input streams.
TOOL_BLOCKS = frozenset({"tool_use", "server_tool_use"})


@dataclass(slots=True)
class RunRecorder:
    """Stores and announces what one run produces."""

    conversation_id: int
    run_id: int
    user_id: int
    # The model call being streamed (1, 2, ...): it names the streams of its answer.
    call: int = 0
    streams: RunStreams = field(init=False)

    def __post_init__(self) -> None:
        self.streams = RunStreams(self.conversation_id, self.run_id)

    @property
    def abandoned(self) -> bool:
        return self.run_id in tasks.ABANDONED

    def _drop(self) -> bool:
        """True once another process closed this run's history: nothing more is stored.

        Its streams end here too, or the saver would watch them for as long as the process lives.
        """
        if not self.abandoned:
            return False
        self.streams.close()
        return True

    async def event(self, event: RunEvent) -> None:
        """Take one event the runner emitted: streamed text live, the rest stored."""
        if self._drop():
            return
        if isinstance(event, TextDelta | ThinkingDelta):
            await self.streams.add(event.stream, self.call, event.index, event.text)
            return
        take = TAKES.get(type(event))
        if take is not None:
            await take(self, event)
        elif event.stored:
            await self.record(event)

    async def _block_started(self, event: BlockStarted) -> None:
        if event.block_type in TOOL_BLOCKS:
            await self.streams.flush_live()
            live = replace(event, run_id=self.run_id, call=self.call)
            await send_live(self.conversation_id, live)

    async def _block_done(self, event: BlockDone) -> None:
        # The block's text goes out now; the stored message row will hold it whole.
        await self.streams.flush_live()

    async def _model_called(self, event: ModelCalled) -> None:
        self.call = event.call
        await self.record(event, also=lambda: _note_request(self.run_id, event.call, event.model))

    async def _tool_finished(self, event: ToolFinished) -> None:
        await self.record(replace(event, content=event.content[:LIVE_RESULT_CHARS]))

    async def flush(self) -> None:
        """Send the text streamed so far to the browser now."""
        await self.streams.flush_live()

    async def record(
        self,
        event: RunEvent | str,
        data: dict[str, Any] | None = None,
        *,
        hidden: bool = False,
        also: Callable[[], None] | None = None,
    ) -> int:
        """Store one event and announce it once committed; its seq (0: dropped).

        Takes a typed event; a dotted name plus data is read into one (the approvals gate).
        `also` changes what the event says changed, in the same transaction.
        """
        if self._drop():
            return 0
        typed = event_from(event, data or {}) if isinstance(event, str) else event
        typed = await self._previewed(typed)
        await self.streams.flush_live()
        seq, outbox = await sync_to_async(self._store)(typed, hidden, also)
        if typed.ends_streams:
            self.streams.close()
        await broadcast.send(outbox)
        observers.notify(self.context, typed)
        return seq

    async def _previewed(self, event: RunEvent) -> RunEvent:
        """An mcp__ call's event with its arguments as the filter shows them: what is stored,
        sent and traced (`visibility.mcp_call_preview`)."""
        if isinstance(event, ToolCalled) and event.name.startswith("mcp__"):
            shown = await sync_to_async(mcp_call_preview)(
                self.conversation_id, event.name, event.input
            )
            return replace(event, input=shown)
        if isinstance(event, ToolAudited) and event.tool.startswith("mcp__"):
            shown = await sync_to_async(mcp_call_preview)(
                self.conversation_id, event.tool, event.input
            )
            return replace(event, input=shown)
        return event

    @property
    def context(self) -> observers.RunContext:
        return observers.RunContext(self.conversation_id, self.run_id, self.user_id)

    def _store(
        self, event: RunEvent, hidden: bool, also: Callable[[], None] | None
    ) -> tuple[int, broadcast.Outbox]:
        outbox: broadcast.Outbox = []
        with transaction.atomic():  # one commit for the event and what it changes
            if also is not None:
                also()
            stored = eventlog.append_event(
                self.conversation_id, event, run_id=self.run_id, hidden=hidden
            )
            broadcast.publish_on_commit(
                outbox, self.conversation_id, stored.seq, event, hidden=hidden
            )
        return stored.seq, outbox

    async def message(self, message: StoredMessage, invocation: int | None = None) -> None:
        """Store one message row and announce it."""
        if self._drop():
            return
        await self.streams.flush_live()
        # The row holds what was streamed: the unsaved rest of the streams is not needed now.
        self.streams.close()
        # Nothing waits for a finished answer's row but its tab, which shows the text already.
        can_wait = _ends_run(message)
        async with journal().yielding() if can_wait else contextlib.nullcontext():
            if can_wait and self._drop():  # another process closed the history meanwhile
                return
            outbox = await sync_to_async(self._store_message)(message, invocation)
        await broadcast.send(outbox)

    def _store_message(self, message: StoredMessage, invocation: int | None) -> broadcast.Outbox:
        outbox: broadcast.Outbox = []
        with transaction.atomic():  # one commit for the row, its usage and its event
            row = store.append_message(
                self.conversation_id, message, run_id=self.run_id, invocation_id=invocation
            )
            usage = message.meta.get("usage") if message.role == "assistant" else None
            if usage:
                _add_usage(self.run_id, usage)
            event = MessageStored(
                message_id=row.pk,
                role=row.role,
                kind=row.kind,
                is_meta=row.is_meta,
                seq=row.seq,
                run_id=self.run_id,
            )
            stored = eventlog.append_event(
                self.conversation_id, event, run_id=self.run_id, hidden=row.is_meta
            )
            broadcast.publish_on_commit(
                outbox, self.conversation_id, stored.seq, event, hidden=row.is_meta
            )
        return outbox

    async def invocation(self, record: InvocationRecord) -> int | None:
        """Write the audit row of a skill invocation and announce that it happened."""
        if self._drop():
            return None
        await self.streams.flush_live()
        invocation_id = await sync_to_async(_write_invocation)(
            self.conversation_id, self.run_id, record
        )
        # Subscribers learn the facts, never the injected text.
        await self.record(
            SkillInvoked(
                skill=record.skill,
                caller=record.caller,
                decision=record.decision,
                args=record.args,
                error=record.error,
                tool_use_id=record.tool_use_id,
            )
        )
        return invocation_id

    async def tool_call(self, invocation: int, audit: ToolAudit) -> None:
        """Audit a tool call made under an invoked skill."""
        await self.record(ToolAudited(**asdict(audit), invocation_id=invocation))


# How the recorder takes the events it does not simply store as they come (streamed text goes
# live by its class's `stream`; events that are not stored and not here are dropped).
TAKES: dict[type[RunEvent], Callable[[RunRecorder, Any], Awaitable[None]]] = {
    BlockStarted: RunRecorder._block_started,
    BlockDone: RunRecorder._block_done,
    ModelCalled: RunRecorder._model_called,
    ToolFinished: RunRecorder._tool_finished,
}


def _ends_run(message: StoredMessage) -> bool:
    """An answer that calls no tool, of a run no other run waits for (a subagent's answer is
    its parent's tool result): what follows it (the run's end, or, rarely, a Stop hook that
    goes on) needs no tool result from it, only its place in the history."""
    if message.role != "assistant" or "subagent_run" in message.meta:
        return False
    return not any(
        isinstance(block, dict) and block.get("type") == "tool_use" for block in message.content
    )


def _write_invocation(conversation_id: int, run_id: int, record: InvocationRecord) -> int:
    from skills_app.registry.versions import version_for_digest

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
        model_refused=record.model_refused,
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
