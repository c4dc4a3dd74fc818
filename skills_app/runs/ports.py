"""RunPorts over the database, the channel layer and the user's approvals: how a run in this app
reaches the world. `factory.py` builds them; the core runner only sees the protocol.

Every model call goes through `call_model`, start to end: the person's policy admits it (money
set aside), a `ModelCall` row captures its request, `ModelCalled` announces it, its events are
recorded as they stream, and its usage and cost are written when `MessageDone` arrives (the money
set aside settled), or its failure when it fails.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async

from skills_app.core.agent import ForkResult, InvocationRef, TurnState
from skills_app.core.events import MessageDone, ModelCalled, ModelEvent, RunEvent, TurnExcluded
from skills_app.core.llm import ModelClient, ModelError, ModelRequest
from skills_app.core.permissions import Decision, ToolCall, read_filter
from skills_app.core.ports import InvocationRecord, ToolAudit
from skills_app.core.skillfile import SkillSpec
from skills_app.core.tools.workspace import Workspace
from skills_app.core.transcript import StoredMessage
from skills_app.permissions.approvals import PermissionGate
from skills_app.runs import observers, store, usage
from skills_app.runs.recorder import RunRecorder
from skills_app.runs.spending import Spending, Ticket

logger = logging.getLogger(__name__)

ForkFn = Callable[[SkillSpec, str], Awaitable[ForkResult]]


def _failure(exc: BaseException) -> tuple[str, bool]:
    """How a failed call is recorded, and whether it may have been billed: an error answer is
    not; a stream cut after it started, a stop, a failure of ours may have been."""
    if isinstance(exc, ModelError):
        return exc.kind, exc.kind == "stream_cut"
    if isinstance(exc, asyncio.CancelledError | GeneratorExit):
        return "stopped", True
    return "internal", True


@dataclass(slots=True)
class ServicePorts:
    """The ports of one run: model, rules and approvals, recorder, workspace, subagents."""

    client: ModelClient
    recorder: RunRecorder
    gate: PermissionGate
    workspace: Workspace
    forker: ForkFn | None = None
    # The person's policy check of every call (model offered, budget); None: no policy (tests).
    spending: Spending | None = None

    # A subagent's messages are not the conversation's model-bound rows: captured verbatim.
    _messages_from_rows = True

    async def call_model(
        self, request: ModelRequest, *, call: int, skill: str
    ) -> AsyncIterator[ModelEvent]:
        # Before anything is recorded: a refused call was never made (CallRefused).
        reservation = await self.spending.admit(request) if self.spending is not None else None
        call_id: int | None = None
        announced = ended = False
        try:
            call_id = await self._start_call(request, call=call, skill=skill)
            await self.recorder.event(
                ModelCalled(call, request.model, skill=skill, request=request)
            )
            announced = True
            async for event in self.client.stream(request):
                if isinstance(event, MessageDone):
                    ended = True
                    if call_id is not None:
                        await sync_to_async(usage.finish_call)(
                            call_id, event.message, is_demo=self.client.is_demo
                        )
                    await self._settle(reservation, message=event.message, model=request.model)
                    self._observe_answer(event.message)
                else:
                    await self.recorder.event(event)
                yield event
        except BaseException as exc:
            if not ended:
                kind, maybe_billed = _failure(exc)
                if announced or call_id is not None:
                    await self._fail_call(call_id, kind)
                await self._settle(reservation, unknown=maybe_billed)
            raise
        if not ended:
            # The stream ended without the whole message: the runner says the answer was cut.
            await self._fail_call(call_id, "stream_cut")
            await self._settle(reservation, unknown=True)

    async def _settle(self, ticket: Ticket | None, **how: Any) -> None:
        if ticket is None or self.spending is None:
            return
        await self.spending.settle(ticket, **how)

    def _observe_answer(self, message: dict[str, Any]) -> None:
        reported = message.get("usage")
        observers.notify(
            self.recorder.context,
            observers.ModelCallEnded(
                call=self.recorder.call,
                model=str(message.get("model") or ""),
                response_id=str(message.get("id") or ""),
                stop_reason=str(message.get("stop_reason") or ""),
                usage=reported if isinstance(reported, dict) else {},
            ),
        )

    async def _fail_call(self, call_id: int | None, kind: str) -> None:
        observers.notify(
            self.recorder.context,
            observers.ModelCallEnded(call=self.recorder.call, error_kind=kind),
        )
        if call_id is None:
            return
        try:
            await sync_to_async(usage.fail_call)(call_id, kind)
        except Exception:  # the call's failure matters more than its bookkeeping
            logger.exception("could not record the end of model call %s", call_id)

    async def decide(self, call: ToolCall, state: TurnState) -> Decision:
        return await self.gate.decide(call, state)

    async def check(self, call: ToolCall, state: TurnState) -> Decision:
        # The rules alone, never an approval: for `!` commands and skill hooks.
        return await self.gate.check(call, state)

    async def record_message(
        self, message: StoredMessage, *, invocation: InvocationRef | None = None
    ) -> None:
        await self.recorder.message(message, invocation)

    async def exclude_turn(self, reason: str) -> None:
        if self.recorder.abandoned:
            return
        ids = await sync_to_async(store.exclude_latest_turn)(self.recorder.conversation_id, reason)
        if ids:
            # For any open tab: these visible rows will not be sent again (hidden rows' ids are
            # not announced to people who may not know they exist).
            visible = await sync_to_async(store.visible_ids)(ids)
            await self.recorder.record(TurnExcluded(reason=reason, message_ids=tuple(visible)))

    async def record_invocation(self, record: InvocationRecord) -> InvocationRef | None:
        return await self.recorder.invocation(record)

    async def record_tool_call(self, invocation: InvocationRef, audit: ToolAudit) -> None:
        await self.recorder.tool_call(invocation, audit)

    async def path_filter(self, state: TurnState) -> Callable[[str], bool] | None:
        return read_filter(await sync_to_async(self.gate.context)(state))

    async def stage_skill(self, spec: SkillSpec) -> str:
        staged = await sync_to_async(self.workspace.stage_skill)(spec.name, spec.path, spec.digest)
        return str(staged)

    async def emit(self, event: RunEvent) -> None:
        await self.recorder.event(event)

    async def _start_call(self, request: ModelRequest, *, call: int, skill: str) -> int | None:
        if self.recorder.abandoned:
            return None
        return await sync_to_async(usage.start_call)(
            conversation_id=self.recorder.conversation_id,
            run_id=self.recorder.run_id,
            call=call,
            request=request,
            skill=skill,
            is_demo=self.client.is_demo,
            from_rows=self._messages_from_rows,
        )

    async def fork(self, spec: SkillSpec, prompt: str) -> ForkResult:
        if self.forker is None:
            return ForkResult(ok=False, error="A subagent cannot start another subagent.")
        return await self.forker(spec, prompt)


@dataclass(slots=True)
class SubagentPorts(ServicePorts):
    """A subagent's ports: its rows are linked to its run and kept from the parent model."""

    skill: str = ""
    _messages_from_rows = False

    async def exclude_turn(self, reason: str) -> None:
        # A subagent's rows never reach another request (they are stored to_model=False).
        return None

    async def record_message(
        self, message: StoredMessage, *, invocation: InvocationRef | None = None
    ) -> None:
        kept = StoredMessage(
            role=message.role,
            content=message.content,
            kind=message.kind,
            is_meta=message.is_meta,
            to_model=False,
            meta={
                **message.meta,
                "subagent_run": self.recorder.run_id,
                "subagent_skill": self.skill,
            },
        )
        await self.recorder.message(kept, invocation)
