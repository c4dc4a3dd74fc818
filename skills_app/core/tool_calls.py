"""The model's tool calls of one step, answered: skill tools through the delivery profile, every
other tool through its hooks, the permission rules and the tool itself. All results of a step go
back in one user message; a stopped run answers the calls it did not finish as interrupted."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any, Protocol

from .agent import Agent, InvocationRef
from .events import ToolCalled, ToolFinished
from .permissions import Decision, ToolCall
from .ports import RunPorts, ToolAudit
from .profiles import DeliveryProfile, SkillSession
from .skillcalls import SkillCalls
from .tools.base import ToolContext, ToolResult
from .transcript import STOPPED_RESULT, StoredMessage, close_open_tool_uses, tool_result_block

Store = Callable[..., Awaitable[None]]


class ToolSession(SkillSession, Protocol):
    """What answering tool calls needs of the run (the Runner): a skill session, and more."""

    @property
    def offered(self) -> frozenset[str] | None: ...

    @property
    def skill_calls(self) -> SkillCalls: ...

    @property
    def agent(self) -> Agent: ...

    @property
    def ports(self) -> RunPorts: ...

    @property
    def profile(self) -> DeliveryProfile: ...


class ToolCalls:
    """Answers tool calls for one runner, storing through `store` (the runner's own)."""

    def __init__(self, runner: ToolSession, *, store: Store) -> None:
        self.runner = runner
        self.store = store

    async def answer(self, tool_uses: Sequence[dict[str, Any]]) -> None:
        """Run every tool_use of the turn and answer them all in one user message."""
        results: list[dict[str, Any]] = []
        after: list[tuple[StoredMessage, InvocationRef | None]] = []
        try:
            for block in tool_uses:
                if block["name"] in self.runner.profile.tool_names:
                    answer = await self.runner.skill_calls.call(block, self._hook_payload(block))
                    if answer.result is not None:
                        results.append(answer.result)
                    after.extend(answer.rows)
                else:
                    result = await self._run_tool(block)
                    results.append(
                        tool_result_block(
                            block["id"],
                            result.content,
                            is_error=result.is_error,
                            blocks=result.blocks,
                        )
                    )
        except asyncio.CancelledError:
            await self._store_results(results, after, close=True)
            raise
        await self._store_results(results, after)

    async def _store_results(
        self,
        results: list[dict[str, Any]],
        after: list[tuple[StoredMessage, InvocationRef | None]],
        *,
        close: bool = False,
    ) -> None:
        """The turn's tool results in one row (open calls answered as stopped), then the rest."""
        meta: dict[str, Any] = {}
        if close:
            answered = [r["tool_use_id"] for r in results]
            closing = close_open_tool_uses(
                self.runner.history, answered=answered, content=STOPPED_RESULT
            )
            results = results + closing
            if closing:
                meta["stopped"] = True
        if results:
            await self.store(
                StoredMessage(role="user", kind="tool_result", content=tuple(results), meta=meta)
            )
        for message, invocation in after:
            await self.store(message, invocation=invocation)

    def _hook_payload(self, block: dict[str, Any]) -> dict[str, Any]:
        return {
            "tool_name": block["name"],
            "tool_input": block.get("input") or {},
            "tool_use_id": block["id"],
            "session_id": self.runner.agent.config.session_id,
            "active_skills": list(self.runner.state.active_skills),
        }

    async def _run_tool(self, block: dict[str, Any]) -> ToolResult:
        name = block["name"]
        tool_input = block.get("input") or {}
        tool = self.runner.agent.tools.get(name)
        payload = self._hook_payload(block)
        decision: Decision | None = None
        # A blocked or refused call has no PostToolUse event (seed 000's hook contract).
        refused = False
        offered = self.runner.offered
        disallowed = self.runner.state.disallowed_tools
        as_rule = _permission_call(tool, name, tool_input)
        if (
            tool is None
            or name in disallowed
            or as_rule.tool in disallowed
            or (offered is not None and name not in offered)
        ):
            available = [
                n
                for n in self.runner.agent.tools.names()
                if n not in disallowed and (offered is None or n in offered)
            ]
            result = ToolResult(
                content=f'Error: unknown tool "{name}". Available tools: ' + ", ".join(available),
                is_error=True,
            )
        elif block.get("input_error"):
            result = ToolResult(content=f"Error: {block['input_error']}", is_error=True)
        elif blocked := await self.runner.agent.hooks.first_block("PreToolUse", payload):
            result = ToolResult(content=f"Blocked by a hook: {blocked.reason}", is_error=True)
            refused = True
        else:
            await self.runner.ports.emit(ToolCalled(block["id"], name, dict(tool_input)))
            decision = await self.runner.decide(as_rule)
            if decision.behavior != "allow":
                result = ToolResult(content=f"Permission denied: {decision.reason}", is_error=True)
                refused = True
            else:
                ctx = replace(
                    self.runner.tool_context(),
                    path_allowed=await self.runner.ports.path_filter(self.runner.state),
                )
                result = await _run(tool, tool_input, ctx)
        if not refused:
            await self.runner.agent.hooks.run(
                "PostToolUse", {**payload, "result": result, "decision": decision}
            )
        if self.runner.state.current_invocation is not None:
            audit = ToolAudit(
                tool_use_id=block["id"],
                tool=name,
                input=dict(tool_input),
                is_error=result.is_error,
                decision=decision.behavior if decision else None,
                reason=decision.reason if decision else None,
            )
            await self.runner.ports.record_tool_call(self.runner.state.current_invocation, audit)
        await self.runner.ports.emit(
            ToolFinished(
                tool_use_id=block["id"],
                name=name,
                is_error=result.is_error,
                content=result.content,
                artifacts=tuple(result.artifacts),
                decision=decision.behavior if decision else None,
                reason=decision.reason if decision else None,
                telemetry=result.telemetry,
            )
        )
        return result


def _permission_call(tool: Any, name: str, tool_input: dict[str, Any]) -> ToolCall:
    """The call the rules decide: a design's own tool names the Skillscope tool it stands for
    (tool-result's `bash` is decided as `Bash(command)`), every other tool itself."""
    as_rule = getattr(tool, "permission_call", None)
    if callable(as_rule):
        call: ToolCall = as_rule(tool_input)
        return call
    return ToolCall(tool=name, input=tool_input)


async def _run(tool: Any, tool_input: dict[str, Any], ctx: ToolContext) -> ToolResult:
    try:
        result: ToolResult = await tool.run(tool_input, ctx)
        return result
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a tool failure is a result the model can read
        message = str(exc) or exc.__class__.__name__
        return ToolResult(content=f"Error: {message}", is_error=True)
