"""RunPorts over the database, the channel layer and the user's approvals: how a run in this app
reaches the world. `factory.py` builds them; the core runner only sees the protocol.

A run's model calls go through `call_model`: admitted, recorded as a `ModelCall` row and settled
as every model call of the app is (`model_calls.metered`); announced (`ModelCalled`), each event
recorded as it streams, and the observers told how each call ended.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async

from skills_app.core.agent import ForkResult, InvocationRef, TurnState
from skills_app.core.events import MessageDone, ModelCalled, ModelEvent, RunEvent, TurnExcluded
from skills_app.core.llm import ModelClient, ModelRequest
from skills_app.core.permissions import Decision, ToolCall, read_filter
from skills_app.core.ports import InvocationRecord, ToolAudit
from skills_app.core.skillfile import SkillSpec
from skills_app.core.tools.workspace import Workspace
from skills_app.core.transcript import StoredMessage
from skills_app.permissions.approvals import PermissionGate
from skills_app.runs import observers, store
from skills_app.runs.model_calls import CallRow, failure, metered
from skills_app.runs.recorder import RunRecorder
from skills_app.runs.spending import Spending

ForkFn = Callable[[SkillSpec, str], Awaitable[ForkResult]]


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

    def call_model(
        self, request: ModelRequest, *, call: int, skill: str
    ) -> AsyncIterator[ModelEvent]:
        # Admitted, recorded as a ModelCall row and settled as every model call is; a run that
        # another process closed keeps no row.
        row = None
        if not self.recorder.abandoned:
            row = CallRow(
                self.recorder.conversation_id,
                self.recorder.run_id,
                call,
                skill,
                from_rows=self._messages_from_rows,
            )
        return metered(
            request,
            self._relayed(request, call=call, skill=skill),
            spending=self.spending,
            row=row,
            is_demo=self.client.is_demo,
        )

    async def _relayed(
        self, request: ModelRequest, *, call: int, skill: str
    ) -> AsyncIterator[ModelEvent]:
        """The model's stream, announced and recorded event by event for whoever watches the
        run; the observers are told how it ended."""
        await self.recorder.event(ModelCalled(call, request.model, skill=skill, request=request))
        answered = False
        try:
            async for event in self.client.stream(request):
                if isinstance(event, MessageDone):
                    answered = True
                    self._observe_answer(event.message)
                else:
                    await self.recorder.event(event)
                yield event
        except BaseException as exc:
            if not answered:
                self._observe_failure(failure(exc)[0])
            raise
        if not answered:
            self._observe_failure("stream_cut")

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

    def _observe_failure(self, kind: str) -> None:
        observers.notify(
            self.recorder.context,
            observers.ModelCallEnded(call=self.recorder.call, error_kind=kind),
        )

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
