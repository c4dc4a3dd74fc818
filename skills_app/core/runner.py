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

from .admission import CallRefused
from .agent import Agent, AgentConfig, ForkResult, InvocationRef, RunOutcome, TurnState
from .context_window import (
    ContextFull,
    PreviousCall,
    check_context,
    prefix_chars,
)
from .events import HookRan
from .invocation import SkillInvoker
from .llm import ModelError, ModelRequest
from .model_catalog import resolve_model_id
from .model_stream import ModelStream
from .permissions import Decision, ToolCall, parse_rule
from .ports import RunPorts
from .profiles import (
    CLAUDE_CODE,
    Rendering,
    SkillOutcome,
    get_profile,
    skill_context,
    slash_invokes,
)
from .request import compose_request
from .skillcalls import SkillCalls
from .skillhooks import SkillHookRunner
from .skilltool import SKILL_TOOL, parse_slash_command
from .slash_files import missing_files, missing_files_note
from .stop_reasons import StopNotice, stop_notice
from .tool_calls import ToolCalls
from .tools.base import ToolContext, ToolError
from .tools.bash import BashTool
from .transcript import (
    StoredMessage,
    is_empty_text,
)
from .turn_ends import TurnEnds

logger = logging.getLogger(__name__)


class Runner:
    """Runs one agent for one user turn until the model stops; implements `SkillSession`."""

    def __init__(self, agent: Agent, ports: RunPorts) -> None:
        self.profile = get_profile(agent.config.profile)
        # A design may bring its own tools (tool-result's bash, read_file...): they answer calls.
        self.agent = replace(agent, tools=self.profile.tools(agent.tools, agent.config))
        agent = self.agent
        self.ports = ports
        self.state = TurnState(disallowed_tools=set(agent.removed_tools))
        self.history: list[StoredMessage] = []
        self.model_calls = 0
        # The tool names of the last request: a call of any other tool is answered as unknown
        # (a profile may offer a tool only for part of a turn). None before the first request.
        self._offered: frozenset[str] | None = None
        # What the last model call saw, to estimate the next request (seeded from earlier runs).
        self._previous: PreviousCall | None = agent.previous_call
        self._warned_context = False
        self.stream = ModelStream(ports)
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
        self.tool_calls = ToolCalls(self, store=self._store)
        self.ends = TurnEnds(self, store=self._store)
        self.skill_calls = SkillCalls(self, agent.hooks, ports)
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

    @property
    def config(self) -> AgentConfig:
        return self.agent.config

    @property
    def offered(self) -> frozenset[str] | None:
        """The tool names of the last request (None before the first)."""
        return self._offered

    async def invoke(
        self,
        name: str,
        args: str,
        *,
        caller: str,
        tool_use_id: str | None,
        permission: str = SKILL_TOOL,
        rendering: Rendering = CLAUDE_CODE,
        context: bool = True,
    ) -> SkillOutcome:
        return await self.invoker.invoke(
            name,
            args,
            caller=caller,
            tool_use_id=tool_use_id,
            permission=permission,
            rendering=rendering,
            context=context and skill_context(self.agent.config),
        )

    async def stage_skill(self, name: str) -> str:
        spec = self.agent.skills.get(name)
        if spec is None:
            raise ToolError(f'The skill "{name}" is not offered in this conversation.')
        return await self.ports.stage_skill(spec)

    def forks(self, name: str) -> bool:
        # `context: fork` is part of Claude Code's execution context, which not every design has.
        spec = self.agent.skills.get(name)
        forked = spec is not None and spec.context == "fork"
        return forked and skill_context(self.agent.config)

    async def run_fork(self, name: str, outcome: SkillOutcome) -> ForkResult:
        """Run a `context: fork` skill as a subagent; its context change stays in the subagent."""
        spec = self.agent.skills.get(name)
        assert spec is not None
        self.state.skill_rules = [r for r in self.state.skill_rules if r.scope_skill != spec.name]
        model = resolve_model_id(spec.model or "")
        if model and self.state.model_override == model:
            self.state.model_override = None
        if spec.effort and self.state.effort_override == spec.effort:
            self.state.effort_override = None
        await self._store(outcome.messages[0], invocation=outcome.invocation)
        return await self.ports.fork(spec, outcome.messages[1].plain_text)

    async def decide(self, call: ToolCall, *, allow_by_default: bool = False) -> Decision:
        if not allow_by_default:
            return await self.ports.decide(call, self.state)
        # The design runs this call unasked: a bare allow for its tool, under every deny and
        # ask rule (and, for commands, still asking when a guarded rule cannot see everything).
        design = parse_rule(call.tool, "allow", source="default")
        state = replace(self.state, skill_rules=[*self.state.skill_rules, design])
        decision = await self.ports.decide(call, state)
        if decision.rule == design:
            why = f"{self.profile.name} as the source design: its {call.tool} calls run unasked"
            return Decision("allow", why, design)
        return decision

    # -- entry point ----------------------------------------------------------------------

    async def run(self, history: Sequence[StoredMessage], user_text: str | None) -> RunOutcome:
        """Handle the user's text, then loop until the model stops.

        `history` already holds the user's message (stored when it was sent); `user_text` is that
        message, for the UserPromptSubmit hooks and to deliver the skills of a slash command.
        """
        self.history[:] = history
        try:
            for text in self.agent.notices:
                await self.ends.notice("notice", text, code="mcp_server_left_out")
            if user_text is not None:
                blocked = await self.agent.hooks.first_block(
                    "UserPromptSubmit",
                    {"prompt": user_text, "session_id": self.agent.config.session_id},
                )
                if blocked:
                    await self.ends.notice(
                        "error", f"Your message was blocked by a hook: {blocked.reason}"
                    )
                    return RunOutcome(status="blocked", error=blocked.reason, error_kind="hook")
                if not await self._user_entrance(user_text):
                    return RunOutcome(status="done", stop_reason="skill_failed")
            return await self._loop()
        except asyncio.CancelledError:
            await self.ends.on_cancel()
            raise

    def build_request(self) -> ModelRequest:
        """The next request: system prompt, tools (with the profile's skill tools), messages."""
        request = compose_request(
            self.history,
            tools=self.agent.tools,
            skills=self.agent.skills,
            config=self.agent.config,
            state=self.state,
        )
        self._offered = frozenset(t["name"] for t in request.tools)
        return request

    # -- the user's turn ------------------------------------------------------------------

    async def _user_entrance(self, text: str) -> bool:
        """Deliver the skills of a slash command (the services stored the user's text already);
        False stops the run."""
        command = parse_slash_command(text, lambda n: self.agent.skills.get(n) is not None)
        if command is None or not slash_invokes(self.agent.config):
            # Without server-side slash commands the text went to the model as typed.
            return True
        missing = missing_files(command.args, self.agent.tool_context.workspace)
        if missing:
            await self.ends.notice("notice", missing_files_note(missing), code="missing_files")
        delivered = 0
        permission, rendering = self.profile.invocation_form(self.agent.config)
        for name in command.names:
            outcome = await self.invoke(
                name,
                command.args,
                caller="user",
                tool_use_id=None,
                permission=permission,
                rendering=rendering,
            )
            if not outcome.ok:
                await self.ends.notice("error", outcome.error, skill=name, code=outcome.code)
            elif self.forks(name):
                forked = await self.run_fork(name, outcome)
                if not forked.ok:
                    await self.ends.notice(
                        "error", forked.error, skill=name, code="subagent_failed"
                    )
                    continue
                result = f'Result of the "{name}" skill (run as a subagent):\n\n{forked.text}'
                meta = {"skill": name, "subagent_result": True, "subagent_run": forked.run}
                await self._store(StoredMessage.text("user", result, meta=meta))
                delivered += 1
            else:
                for message in self.profile.deliver_slash(self, outcome.messages):
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
                await self.ends.notice("error", message, code="turn_limit")
                return self.ends.outcome("failed", error=message, error_kind="turn_limit")
            turns += 1
            try:
                request, final = await self._call_model()
            except ContextFull as full:
                return await self.ends.context_full(full.estimate)
            except CallRefused as refused:
                return await self.ends.refused(refused)
            except ModelError as exc:
                return await self.ends.model_failed(exc)
            stop_reason = final.get("stop_reason")
            content = [b for b in final.get("content", []) if not is_empty_text(b)]
            if stop_reason == "max_tokens":
                # A tool_use cut off by the token limit has no usable input: drop it.
                content = [b for b in content if b.get("type") != "tool_use"]
            tool_uses = [b for b in content if b.get("type") == "tool_use"]
            if content:
                meta = {
                    "stop_reason": stop_reason,
                    "model": final.get("model", ""),
                    "usage": final.get("usage", {}),
                    "call": self.model_calls,
                }
                kind = "tool_use" if tool_uses else "text"
                await self._store(
                    StoredMessage(role="assistant", content=tuple(content), kind=kind, meta=meta)
                )
            if stop_reason == "tool_use" and tool_uses:
                await self.tool_calls.answer(tool_uses)
                continue
            if stop_reason == "pause_turn" and content:
                continue
            notice = stop_notice(
                stop_reason,
                model=str(final.get("model") or request.model),
                max_tokens=request.output_limit,
                has_content=bool(content),
            )
            if notice is not None:
                await self.ends.tell(notice, "notice")
                if notice.exclude_turn:
                    # A refused turn ends here: Stop hooks must not continue what was declined.
                    return self.ends.outcome("done", stop_reason=stop_reason)
            results = await self.agent.hooks.run(
                "Stop", {"stop_reason": stop_reason, "session_id": config.session_id}
            )
            again = next((r for r in results if r.continue_), None)
            if again is not None:
                text = f"Stop hook asked to continue: {again.reason}"
                await self._store(StoredMessage.text("user", text, is_meta=True))
                continue
            return self.ends.outcome("done", stop_reason=stop_reason)

    async def _call_model(self) -> tuple[ModelRequest, dict[str, Any]]:
        request = self.build_request()
        estimate = check_context(request, self._previous)
        if estimate.level == "over":
            raise ContextFull(estimate)
        if estimate.level == "near" and not self._warned_context:
            self._warned_context = True
            near = StopNotice("context_near", estimate.message, offer_new_conversation=True)
            await self.ends.tell(near, "notice", tokens=estimate.tokens, window=estimate.window)
        self.model_calls += 1
        skill = self.state.active_skills[-1] if self.state.active_skills else ""
        try:
            final = await self.stream.answer(request, call=self.model_calls, skill=skill)
        except CallRefused:
            self.model_calls -= 1  # refused before it was sent: no call was made
            raise
        self._previous = PreviousCall(
            usage=final.get("usage") or {},
            message_count=len(request.messages),
            prefix_chars=prefix_chars(request),
        )
        return request, final

    # -- storage ----------------------------------------------------------------------------

    async def _store(
        self, message: StoredMessage, *, invocation: InvocationRef | None = None
    ) -> None:
        self.history.append(message)
        await self.ports.record_message(message, invocation=invocation)

    async def notice_failure(self, text: str) -> None:
        """Record an unexpected failure of the run for the user."""
        await self.ends.notice("error", text, code="internal")

    # -- skill hooks ----------------------------------------------------------------------

    async def _check_hook_command(self, command: str, skill: str) -> Decision:
        # Admin rules (also those scoped to the hook's skill) and grants; not the skill's own
        # allowed-tools: a hook outlives the turn of its skill and must not approve itself.
        state = TurnState(active_skills=[skill])
        return await self.ports.check(ToolCall(tool="Bash", input={"command": command}), state)

    def _bash_tool(self) -> BashTool:
        tool = self.agent.tools.get("Bash")
        return tool if isinstance(tool, BashTool) else BashTool()
