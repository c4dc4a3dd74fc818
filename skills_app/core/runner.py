"""The agent loop: stream the model, answer its tool calls, deliver skills. No Django here.

The Runner executes one `Agent` (configuration) for one user turn, reaching the world only through
`RunPorts`. The messages sent to the model are always rebuilt from the stored rows
(`compose_request`), so the request is a pure function of what was persisted. Hooks observe and
may block; they never carry values between layers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from .agent import Agent, ForkResult, InvocationRef, RunOutcome, TurnState
from .events import (
    BlockDone,
    BlockStarted,
    HookRan,
    ModelCalled,
    TextDelta,
    ThinkingDelta,
    ToolCalled,
    ToolFinished,
)
from .invocation import SkillInvoker
from .llm import BlockDone as StreamBlockDone
from .llm import BlockStart, MessageDone, ModelError, ModelRequest
from .llm import TextDelta as StreamTextDelta
from .llm import ThinkingDelta as StreamThinkingDelta
from .permissions import Decision, ToolCall
from .ports import RunPorts, ToolAudit
from .profiles import SkillOutcome, ToolAnswer, get_profile
from .request import compose_request
from .skillhooks import SkillHook, SkillHookRunner
from .skilltool import parse_slash_command
from .tools.base import ToolContext, ToolResult
from .tools.bash import BashTool
from .transcript import StoredMessage, close_open_tool_uses, tool_result_block

logger = logging.getLogger(__name__)

HIDDEN_RESULT = "(skill instructions, hidden)"


class Runner:
    """Runs one agent for one user turn until the model stops; implements `SkillSession`."""

    def __init__(self, agent: Agent, ports: RunPorts) -> None:
        self.agent = agent
        self.ports = ports
        self.profile = get_profile(agent.config.profile)
        self.state = TurnState(disallowed_tools=set(agent.removed_tools))
        self.history: list[StoredMessage] = []
        self.model_calls = 0
        # Text pieces per block of the answer being streamed (joined on demand: growing a str
        # would be quadratic), and the blocks already complete.
        self._partial_text: dict[int, list[str]] = {}
        self._partial_blocks: dict[int, dict[str, Any]] = {}
        self._bash = self._bash_tool()
        self.skill_hooks = SkillHookRunner(
            agent.hooks,
            check=self._check_hook_command,
            context=self.tool_context,
            report=lambda report: self.ports.emit(HookRan(report)),
            session_id=agent.config.session_id,
            bash=self._bash,
        )
        self.skill_hooks.register(agent.skill_hooks)
        self.invoker = SkillInvoker(
            agent=agent,
            ports=ports,
            state=self.state,
            history=self.history,
            register_hooks=self.skill_hooks.register,
            bash=self._bash,
        )

    # -- SkillSession ---------------------------------------------------------------------

    @property
    def skills(self) -> Any:
        return self.agent.skills

    def tool_context(self) -> ToolContext:
        ctx = self.agent.tool_context
        return replace(ctx, env={**ctx.env, **self.state.env}) if self.state.env else ctx

    async def invoke(
        self, name: str, args: str, *, caller: str, tool_use_id: str | None
    ) -> SkillOutcome:
        return await self.invoker.invoke(name, args, caller=caller, tool_use_id=tool_use_id)

    def forks(self, name: str) -> bool:
        spec = self.agent.skills.get(name)
        return spec is not None and spec.context == "fork"

    async def run_fork(self, name: str, outcome: SkillOutcome) -> ForkResult:
        """Run a `context: fork` skill as a subagent; its context change stays in the subagent."""
        spec = self.agent.skills.get(name)
        assert spec is not None
        self.state.skill_rules = [r for r in self.state.skill_rules if r.scope_skill != spec.name]
        if spec.model and self.state.model_override == spec.model:
            self.state.model_override = None
        await self._store(outcome.messages[0], invocation=outcome.invocation)
        return await self.ports.fork(spec, outcome.messages[1].plain_text)

    async def decide(self, call: ToolCall) -> Decision:
        return await self.ports.decide(call, self.state)

    # -- entry point ----------------------------------------------------------------------

    async def run(self, history: Sequence[StoredMessage], user_text: str | None) -> RunOutcome:
        """Handle the user's text, then loop until the model stops.

        `history` already holds the user's message (stored when it was sent); `user_text` is that
        message, for the UserPromptSubmit hooks and to deliver the skills of a slash command.
        """
        self.history[:] = history
        try:
            if user_text is not None:
                blocked = await self.agent.hooks.first_block(
                    "UserPromptSubmit",
                    {"prompt": user_text, "session_id": self.agent.config.session_id},
                )
                if blocked:
                    await self._notice(
                        "error", f"Your message was blocked by a hook: {blocked.reason}"
                    )
                    return RunOutcome(status="blocked", error=blocked.reason, error_kind="hook")
                if not await self._user_entrance(user_text):
                    return RunOutcome(status="done", stop_reason="skill_failed")
            return await self._loop()
        except asyncio.CancelledError:
            await self._on_cancel()
            raise

    def build_request(self) -> ModelRequest:
        """The next request: system prompt, tools (with the profile's skill tools), messages."""
        return compose_request(
            self.history,
            tools=self.agent.tools,
            skills=self.agent.skills,
            config=self.agent.config,
            state=self.state,
        )

    # -- the user's turn ------------------------------------------------------------------

    async def _user_entrance(self, text: str) -> bool:
        """Deliver the skills of a slash command (the services stored the user's text already);
        False stops the run."""
        command = parse_slash_command(text, lambda n: self.agent.skills.get(n) is not None)
        if command is None:
            return True
        delivered = 0
        for name in command.names:
            outcome = await self.invoke(name, command.args, caller="user", tool_use_id=None)
            if not outcome.ok:
                await self._notice("error", outcome.error, skill=name, code=outcome.code)
            elif self.forks(name):
                forked = await self.run_fork(name, outcome)
                if not forked.ok:
                    await self._notice("error", forked.error, skill=name, code="subagent_failed")
                    continue
                result = f'Result of the "{name}" skill (run as a subagent):\n\n{forked.text}'
                meta = {"skill": name, "subagent_result": True, "subagent_run": forked.run}
                await self._store(StoredMessage.text("user", result, meta=meta))
                delivered += 1
            else:
                for message in self.profile.deliver_slash(outcome.messages):
                    await self._store(message, invocation=outcome.invocation)
                delivered += 1
        return delivered > 0

    # -- the loop -------------------------------------------------------------------------

    async def _loop(self) -> RunOutcome:
        config = self.agent.config
        turns = 0
        while True:
            if turns >= config.max_turns:
                message = (
                    f"Stopped after {config.max_turns} model calls in one turn (the turn "
                    "limit). Send a message to continue."
                )
                await self._notice("error", message, code="turn_limit")
                return self._outcome("failed", error=message, error_kind="turn_limit")
            turns += 1
            try:
                final = await self._call_model()
            except ModelError as exc:
                await self._store_partial(exc.partial_content)
                await self._notice("error", exc.message, code=exc.kind)
                return self._outcome("failed", error=exc.message, error_kind=exc.kind)
            stop_reason = final.get("stop_reason")
            content = [b for b in final.get("content", []) if not _empty_text(b)]
            if stop_reason == "max_tokens":
                # A tool_use cut off by the token limit has no usable input: drop it.
                content = [b for b in content if b.get("type") != "tool_use"]
            tool_uses = [b for b in content if b.get("type") == "tool_use"]
            if content:
                meta = {
                    "stop_reason": stop_reason,
                    "model": final.get("model", ""),
                    "usage": final.get("usage", {}),
                }
                kind = "tool_use" if tool_uses else "text"
                await self._store(
                    StoredMessage(role="assistant", content=tuple(content), kind=kind, meta=meta)
                )
            if stop_reason == "tool_use" and tool_uses:
                await self._answer_tool_uses(tool_uses)
                continue
            if stop_reason == "pause_turn" and content:
                continue
            await self._stop_notice(stop_reason, bool(content))
            results = await self.agent.hooks.run(
                "Stop", {"stop_reason": stop_reason, "session_id": config.session_id}
            )
            again = next((r for r in results if r.continue_), None)
            if again is not None:
                text = f"Stop hook asked to continue: {again.reason}"
                await self._store(StoredMessage.text("user", text, is_meta=True))
                continue
            return self._outcome("done", stop_reason=stop_reason)

    async def _stop_notice(self, stop_reason: str | None, has_content: bool) -> None:
        if stop_reason == "max_tokens":
            text = "The answer was cut off at the output token limit. Ask to continue."
            await self._notice("notice", text, code="max_tokens")
        elif stop_reason == "refusal":
            text = "The model declined to answer this request."
            await self._notice("notice", text, code="refusal")
        elif not has_content:
            await self._notice("notice", "The model returned an empty response.", code="empty")

    async def _call_model(self) -> dict[str, Any]:
        request = self.build_request()
        self.model_calls += 1
        await self.ports.emit(ModelCalled(self.model_calls, request.model, request=request))
        self._partial_text, self._partial_blocks = {}, {}
        final: dict[str, Any] | None = None
        async for event in self.ports.stream(request):
            if isinstance(event, StreamTextDelta):
                self._partial_text.setdefault(event.index, []).append(event.text)
                await self.ports.emit(TextDelta(event.index, event.text))
            elif isinstance(event, StreamThinkingDelta):
                await self.ports.emit(ThinkingDelta(event.index, event.text))
            elif isinstance(event, BlockStart):
                started = BlockStarted(
                    event.index, event.block_type, event.tool_name, event.tool_use_id
                )
                await self.ports.emit(started)
            elif isinstance(event, StreamBlockDone):
                self._partial_blocks[event.index] = event.block
                await self.ports.emit(BlockDone(event.index, event.block))
            elif isinstance(event, MessageDone):
                final = event.message
        self._partial_text, self._partial_blocks = {}, {}
        if final is None:
            raise ModelError(
                kind="stream_cut",
                message="The model's answer ended unexpectedly. Try again.",
                retryable=True,
                partial_content=[],
            )
        return final

    # -- tools ----------------------------------------------------------------------------

    async def _answer_tool_uses(self, tool_uses: Sequence[dict[str, Any]]) -> None:
        """Run every tool_use of the turn and answer them all in one user message."""
        results: list[dict[str, Any]] = []
        after: list[tuple[StoredMessage, InvocationRef | None]] = []
        try:
            for block in tool_uses:
                if block["name"] in self.profile.tool_names:
                    answer = await self._skill_tool(block)
                    if answer.result is not None:
                        results.append(answer.result)
                    after.extend(answer.rows)
                else:
                    result = await self._run_tool(block)
                    results.append(
                        tool_result_block(block["id"], result.content, is_error=result.is_error)
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
        """The turn's tool results in one row (open calls answered as interrupted), then the rest."""
        if close:
            answered = [r["tool_use_id"] for r in results]
            results = results + close_open_tool_uses(self.history, answered=answered)
        if results:
            await self._store(
                StoredMessage(role="user", kind="tool_result", content=tuple(results))
            )
        for message, invocation in after:
            await self._store(message, invocation=invocation)

    async def _skill_tool(self, block: dict[str, Any]) -> ToolAnswer:
        """A call of the profile's own tools (loading and running skills)."""
        answer = await self.profile.handle(self, block)
        tool_input = block.get("input") or {}
        skill = answer.skill or str(tool_input.get("skill") or tool_input.get("name") or "")
        result = answer.result
        shown = answer.shown if answer.shown is not None else HIDDEN_RESULT
        await self.ports.emit(
            ToolFinished(
                tool_use_id=block["id"],
                name=block["name"],
                is_error=bool(result and result.get("is_error")),
                content=str(result["content"]) if result is not None else shown,
                skill=skill,
            )
        )
        return answer

    async def _run_tool(self, block: dict[str, Any]) -> ToolResult:
        name = block["name"]
        tool_input = block.get("input") or {}
        tool = self.agent.tools.get(name)
        payload = {
            "tool_name": name,
            "tool_input": tool_input,
            "tool_use_id": block["id"],
            "session_id": self.agent.config.session_id,
            "active_skills": list(self.state.active_skills),
        }
        decision: Decision | None = None
        if tool is None or name in self.state.disallowed_tools:
            available = [
                n for n in self.agent.tools.names() if n not in self.state.disallowed_tools
            ]
            result = ToolResult(
                content=f'Error: unknown tool "{name}". Available tools: ' + ", ".join(available),
                is_error=True,
            )
        elif block.get("input_error"):
            result = ToolResult(content=f"Error: {block['input_error']}", is_error=True)
        elif blocked := await self.agent.hooks.first_block("PreToolUse", payload):
            result = ToolResult(content=f"Blocked by a hook: {blocked.reason}", is_error=True)
        else:
            await self.ports.emit(ToolCalled(block["id"], name, dict(tool_input)))
            decision = await self.decide(ToolCall(tool=name, input=tool_input))
            if decision.behavior != "allow":
                result = ToolResult(content=f"Permission denied: {decision.reason}", is_error=True)
            else:
                ctx = replace(
                    self.tool_context(), path_allowed=await self.ports.path_filter(self.state)
                )
                result = await _run(tool, tool_input, ctx)
        await self.agent.hooks.run(
            "PostToolUse", {**payload, "result": result, "decision": decision}
        )
        if self.state.current_invocation is not None:
            audit = ToolAudit(
                tool_use_id=block["id"],
                tool=name,
                input=dict(tool_input),
                is_error=result.is_error,
                decision=decision.behavior if decision else None,
                reason=decision.reason if decision else None,
            )
            await self.ports.record_tool_call(self.state.current_invocation, audit)
        await self.ports.emit(
            ToolFinished(
                tool_use_id=block["id"],
                name=name,
                is_error=result.is_error,
                content=result.content,
                artifacts=tuple(result.artifacts),
                decision=decision.behavior if decision else None,
                reason=decision.reason if decision else None,
            )
        )
        return result

    # -- storage and cancellation -----------------------------------------------------------

    async def _store(
        self, message: StoredMessage, *, invocation: InvocationRef | None = None
    ) -> None:
        self.history.append(message)
        await self.ports.record_message(message, invocation=invocation)

    async def _notice(self, kind: str, text: str, **meta: Any) -> None:
        """A row for the user (an error or a notice) that the model never sees."""
        await self._store(
            StoredMessage.text("assistant", text, kind=kind, to_model=False, meta=meta)
        )

    async def notice_failure(self, text: str) -> None:
        """Record an unexpected failure of the run for the user."""
        await self._notice("error", text, code="internal")

    async def _store_partial(self, blocks: Sequence[dict[str, Any]]) -> None:
        kept = [b for b in blocks if b.get("type") == "text" and b.get("text", "").strip()]
        if kept:
            partial = StoredMessage(role="assistant", content=tuple(kept), meta={"partial": True})
            await self._store(partial)

    async def _on_cancel(self) -> None:
        """Keep the partial answer and answer every open tool_use so the history stays valid."""
        try:
            if self._partial_text or self._partial_blocks:
                blocks: list[dict[str, Any]] = []
                for index in sorted(set(self._partial_text) | set(self._partial_blocks)):
                    done = self._partial_blocks.get(index)
                    if done is not None:
                        if done.get("type") == "text":
                            blocks.append(done)
                    elif index in self._partial_text:
                        blocks.append({"type": "text", "text": "".join(self._partial_text[index])})
                await self._store_partial(blocks)
                self._partial_text, self._partial_blocks = {}, {}
            closing = close_open_tool_uses(self.history)
            if closing:
                await self._store(
                    StoredMessage(role="user", kind="tool_result", content=tuple(closing))
                )
        except Exception:  # never let cleanup hide the cancellation
            logger.exception("could not store the interrupted state")

    def _outcome(self, status: str, **fields: Any) -> RunOutcome:
        return RunOutcome(status=status, model_calls=self.model_calls, **fields)

    # -- skill hooks ----------------------------------------------------------------------

    async def _check_hook_command(self, command: str, skill: str) -> Decision:
        # Admin rules (also those scoped to the hook's skill) and grants; not the skill's own
        # allowed-tools: a hook outlives the turn of its skill and must not approve itself.
        state = TurnState(active_skills=[skill])
        return await self.ports.check(ToolCall(tool="Bash", input={"command": command}), state)

    def register_skill_hooks(self, skill_hooks: Sequence[SkillHook]) -> list[SkillHook]:
        """Run these skill hooks from now on (each once, however often it is registered)."""
        return self.skill_hooks.register(skill_hooks)

    def _bash_tool(self) -> BashTool:
        tool = self.agent.tools.get("Bash")
        return tool if isinstance(tool, BashTool) else BashTool()


async def _run(tool: Any, tool_input: dict[str, Any], ctx: ToolContext) -> ToolResult:
    try:
        result: ToolResult = await tool.run(tool_input, ctx)
        return result
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a tool failure is a result the model can read
        message = str(exc) or exc.__class__.__name__
        return ToolResult(content=f"Error: {message}", is_error=True)


def _empty_text(block: dict[str, Any]) -> bool:
    return block.get("type") == "text" and not block.get("text")
