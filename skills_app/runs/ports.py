"""RunPorts over the database, the channel layer and the user's approvals: how a run in this app
reaches the world. `factory.py` builds them; the core runner only sees the protocol."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from asgiref.sync import sync_to_async

from skills_app.core.agent import ForkResult, InvocationRef, TurnState
from skills_app.core.events import RunEvent
from skills_app.core.llm import ModelClient, ModelRequest, StreamEvent
from skills_app.core.permissions import Decision, ToolCall, decide, read_filter
from skills_app.core.ports import InvocationRecord, ToolAudit
from skills_app.core.skillfile import SkillSpec
from skills_app.core.tools.workspace import Workspace
from skills_app.core.transcript import StoredMessage
from skills_app.permissions.approvals import PermissionGate
from skills_app.runs.recorder import RunRecorder

ForkFn = Callable[[SkillSpec, str], Awaitable[ForkResult]]


@dataclass(slots=True)
class ServicePorts:
    """The ports of one run: model, rules and approvals, recorder, workspace, subagents."""

    client: ModelClient
    recorder: RunRecorder
    gate: PermissionGate
    workspace: Workspace
    forker: ForkFn | None = None

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        return self.client.stream(request)

    async def decide(self, call: ToolCall, state: TurnState) -> Decision:
        return await self.gate.decide(call, state)

    async def check(self, call: ToolCall, state: TurnState) -> Decision:
        # The rules alone, never an approval: for `!` commands and skill hooks.
        return decide(call, await sync_to_async(self.gate.context)(state))

    async def record_message(
        self, message: StoredMessage, *, invocation: InvocationRef | None = None
    ) -> None:
        await self.recorder.message(message, invocation)

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
