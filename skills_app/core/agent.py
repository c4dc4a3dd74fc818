"""The agent loop: stream the model, dispatch tools, handle the Skill meta-tool. No Django here.

Dependencies are injected: the model client, the tool registry, a `decide` permission callable
(which may wait for the user's answer), an `emit` callback through which every stored message and
event leaves the loop, and hooks. The messages sent to the model are always rebuilt from the stored
rows with `to_api_messages`, so the request is a pure function of what was persisted.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from .dynamic import DynamicContextError, DynamicRender, render_dynamic, run_shell
from .hooks import HookResult, Hooks
from .llm import (
    BlockDone,
    BlockStart,
    MessageDone,
    ModelClient,
    ModelError,
    ModelRequest,
    TextDelta,
)
from .permissions import Decision, Rule, RuleSyntaxError, ToolCall, parse_rule
from .profile_tools import ProfileToolsMixin
from .profiles import (
    LOAD_SKILL_TOOL,
    META_MESSAGE,
    SYSTEM_PROMPT_PROFILE,
    TOOL_RESULT,
    TOOLSET,
    state_message,
    tool_result_system,
    toolset_system,
)
from .skillfile import SkillSpec
from .skillhooks import SkillHook, SkillHookRunner, parse_skill_hooks
from .skilltool import (
    CANNOT_LOAD,
    PERMISSION_DENIED,
    SKILL_TOOL,
    SkillInvocationError,
    parse_slash_command,
    skill_call_input,
    skill_tool_schema,
    validate_invocation,
)
from .tools.base import ToolContext, ToolRegistry, ToolResult
from .tools.bash import BashTool
from .transcript import (
    HIDDEN_PREFIX,
    INTERRUPTED_RESULT,
    StoredMessage,
    status_message_text,
    to_api_messages,
    tool_result_block,
)

logger = logging.getLogger(__name__)

SYSTEM_PROMPT = (
    "You are Skillscope's assistant. You help the user with their task and can load skills: "
    "folders of instructions, references and scripts. When a listed skill fits the request, "
    "load it with the skill tool you are given; once a skill is loaded, follow its instructions. Tools run inside this "
    "conversation's workspace: write files for the user under out/. Be concise."
)
ALREADY_LOADED = (
    'The skill "{name}" is already loaded above with the same content; follow those instructions.'
)


@dataclass(frozen=True, slots=True)
class AgentEvent:
    type: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AgentConfig:
    model: str
    max_tokens: int = 8192
    max_turns: int = 30
    system_prompt: str = SYSTEM_PROMPT
    session_id: str = ""
    catalog_budget: int = 15_000
    catalog_entry_cap: int = 1_536
    profile: str = META_MESSAGE
    # Replace `!` commands in skill bodies with a notice instead of running them.
    disable_skill_shell: bool = False


@dataclass(slots=True)
class TurnState:
    """The execution context of the current turn; it ends with the user's next message."""

    active_skills: list[str] = field(default_factory=list)
    skill_rules: list[Rule] = field(default_factory=list)
    disallowed_tools: set[str] = field(default_factory=set)
    model_override: str | None = None
    invocation_refs: dict[str, Any] = field(default_factory=dict)
    current_invocation: Any = None


@dataclass(frozen=True, slots=True)
class RunOutcome:
    status: str  # done | failed | blocked
    stop_reason: str | None = None
    error: str = ""
    error_kind: str = ""
    model_calls: int = 0


class SkillProvider(Protocol):
    def get(self, name: str) -> SkillSpec | None: ...

    def skills(self) -> list[SkillSpec]: ...


DecideFn = Callable[[ToolCall, TurnState], Awaitable[Decision]]
EmitFn = Callable[[AgentEvent], Awaitable[Any]]
StageFn = Callable[[SkillSpec], Awaitable[str]]
ForkFn = Callable[[SkillSpec, str], Awaitable["ForkResult"]]


class TurnLimitError(Exception):
    pass


class Agent(ProfileToolsMixin):
    """One agent run: a user turn until the model stops."""

    def __init__(
        self,
        *,
        client: ModelClient,
        tools: ToolRegistry,
        tool_context: ToolContext,
        skills: SkillProvider,
        decide: DecideFn,
        emit: EmitFn,
        stage_skill: StageFn,
        config: AgentConfig,
        hooks: Hooks | None = None,
        check: DecideFn | None = None,
        fork: ForkFn | None = None,
    ) -> None:
        self.client = client
        self.tools = tools
        self.tool_context = tool_context
        self.skills = skills
        self.decide = decide
        self.emit = emit
        self.stage_skill = stage_skill
        self.config = config
        self.hooks = hooks or Hooks()
        # A permission check that never asks (None: nothing is allowed); gates `!` commands and
        # skill hooks, which run without a person to answer.
        self.check = check
        self.fork = fork
        self.skill_hooks = SkillHookRunner(
            self.hooks,
            check=self._check_hook_command if check else None,
            context=lambda: self.tool_context,
            report=lambda data: self.emit(AgentEvent("audit.hook", data)),
            session_id=config.session_id,
            bash=self._bash_tool(),
        )
        self.state = TurnState()
        self.history: list[StoredMessage] = []
        self.model_calls = 0
        # Text pieces per block (joined on demand: growing a str would be quadratic).
        self._partial_text: dict[int, list[str]] = {}
        self._partial_blocks: dict[int, dict[str, Any]] = {}

    # -- storage --------------------------------------------------------------------------

    async def _store(self, message: StoredMessage, **extra: Any) -> Any:
        self.history.append(message)
        return await self.emit(AgentEvent("message", {"message": message, **extra}))

    # -- entry points ---------------------------------------------------------------------

    async def run(self, history: Sequence[StoredMessage], user_text: str | None) -> RunOutcome:
        """Handle the user's text (a slash command or a message), then loop until the model stops."""
        self.history = list(history)
        try:
            if user_text is not None:
                blocked = await self.hooks.first_block(
                    "UserPromptSubmit", {"prompt": user_text, "session_id": self.config.session_id}
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

    async def _user_entrance(self, text: str) -> bool:
        """Store the user's message, or deliver the skills of a slash command; False stops the run."""
        command = parse_slash_command(text, lambda n: self.skills.get(n) is not None)
        if command is None:
            await self._store(StoredMessage.text("user", text))
            return True
        delivered = 0
        for name in command.names:
            outcome = await self._invoke_skill(name, command.args, caller="user", tool_use_id=None)
            if outcome.ok and self._forks(name):
                forked = await self._run_fork(name, outcome)
                if forked.ok:
                    await self._store(
                        StoredMessage.text(
                            "user",
                            f'Result of the "{name}" skill (run as a subagent):\n\n{forked.text}',
                            meta={
                                "skill": name,
                                "subagent_result": True,
                                "subagent_run": forked.run,
                            },
                        )
                    )
                    delivered += 1
                else:
                    await self._notice("error", forked.error, skill=name, code="subagent_failed")
            elif outcome.ok:
                for message in self._user_delivery(outcome.messages):
                    await self._store(message, invocation=outcome.invocation)
                delivered += 1
            else:
                await self._notice("error", outcome.error, skill=name, code=outcome.code)
        return delivered > 0

    def _forks(self, name: str) -> bool:
        spec = self.skills.get(name)
        return self.fork is not None and spec is not None and spec.context == "fork"

    async def _run_fork(self, name: str, outcome: SkillOutcome) -> ForkResult:
        """Run a `context: fork` skill as a subagent; its context change stays in the subagent."""
        spec = self.skills.get(name)
        assert spec is not None and self.fork is not None
        self.state.skill_rules = [r for r in self.state.skill_rules if r.scope_skill != spec.name]
        if spec.model and self.state.model_override == spec.model:
            self.state.model_override = None
        await self._store(outcome.messages[0], invocation=outcome.invocation)
        prompt = outcome.messages[1].plain_text
        return await self.fork(spec, prompt)

    def _user_delivery(self, messages: list[StoredMessage]) -> list[StoredMessage]:
        """A slash command's rows: the toolset profile keeps the body in its state, not a message."""
        if self.config.profile != SYSTEM_PROMPT_PROFILE or len(messages) < 2:
            return messages
        status, hidden = messages[0], messages[1]
        skill = str(hidden.meta.get("skill", ""))
        body = hidden.plain_text.partition("\n\n")[2] or hidden.plain_text
        return [status, state_message(skill, "load", body), *messages[2:]]

    async def _notice(self, kind: str, text: str, **meta: Any) -> None:
        await self._store(
            StoredMessage.text("assistant", text, kind=kind, to_model=False, meta=meta)
        )

    # -- the loop -------------------------------------------------------------------------

    def build_request(self) -> ModelRequest:
        """The next request: system prompt, tools (with the Skill catalog) and stored messages."""
        return compose_request(
            self.history, tools=self.tools, skills=self.skills, config=self.config, state=self.state
        )

    async def _loop(self) -> RunOutcome:
        turns = 0
        while True:
            if turns >= self.config.max_turns:
                message = (
                    f"Stopped after {self.config.max_turns} model calls in one turn (the turn "
                    "limit). Send a message to continue."
                )
                await self._notice("error", message, code="turn_limit")
                return RunOutcome(
                    status="failed",
                    error=message,
                    error_kind="turn_limit",
                    model_calls=self.model_calls,
                )
            turns += 1
            try:
                final = await self._call_model()
            except ModelError as exc:
                await self._store_partial(exc.partial_content)
                await self._notice("error", exc.message, code=exc.kind)
                return RunOutcome(
                    status="failed",
                    error=exc.message,
                    error_kind=exc.kind,
                    model_calls=self.model_calls,
                )
            stop_reason = final.get("stop_reason")
            content = [b for b in final.get("content", []) if _keep_block(b)]
            if stop_reason == "max_tokens":
                # A tool_use cut off by the token limit has no usable input: drop it.
                content = [b for b in content if b.get("type") != "tool_use"]
            tool_uses = [b for b in content if b.get("type") == "tool_use"]
            if content:
                await self._store(
                    StoredMessage(
                        role="assistant",
                        content=tuple(content),
                        kind="tool_use" if tool_uses else "text",
                        meta={
                            "stop_reason": stop_reason,
                            "model": final.get("model", ""),
                            "usage": final.get("usage", {}),
                        },
                    ),
                    usage=final.get("usage", {}),
                )
            if stop_reason == "tool_use" and tool_uses:
                await self._answer_tool_uses(tool_uses)
                continue
            if stop_reason == "pause_turn" and content:
                continue
            if stop_reason == "max_tokens":
                await self._notice(
                    "notice",
                    "The answer was cut off at the output token limit. Ask to continue.",
                    code="max_tokens",
                )
            elif stop_reason == "refusal":
                await self._notice(
                    "notice", "The model declined to answer this request.", code="refusal"
                )
            elif not content:
                await self._notice("notice", "The model returned an empty response.", code="empty")
            results = await self.hooks.run(
                "Stop", {"stop_reason": stop_reason, "session_id": self.config.session_id}
            )
            again = next((r for r in results if r.continue_), None)
            if again is not None:
                await self._store(
                    StoredMessage.text(
                        "user", f"Stop hook asked to continue: {again.reason}", is_meta=True
                    )
                )
                continue
            return RunOutcome(status="done", stop_reason=stop_reason, model_calls=self.model_calls)

    async def _call_model(self) -> dict[str, Any]:
        request = self.build_request()
        self.model_calls += 1
        await self.emit(
            AgentEvent(
                "model.call",
                {"call": self.model_calls, "model": request.model, "request": request},
            )
        )
        self._partial_text = {}
        self._partial_blocks = {}
        final: dict[str, Any] | None = None
        async for event in self.client.stream(request):
            if isinstance(event, TextDelta):
                self._partial_text.setdefault(event.index, []).append(event.text)
                await self.emit(
                    AgentEvent("text.delta", {"index": event.index, "text": event.text})
                )
            elif isinstance(event, BlockStart):
                await self.emit(
                    AgentEvent(
                        "block.start",
                        {
                            "index": event.index,
                            "block_type": event.block_type,
                            "tool_name": event.tool_name,
                            "tool_use_id": event.tool_use_id,
                        },
                    )
                )
            elif isinstance(event, BlockDone):
                self._partial_blocks[event.index] = event.block
                await self.emit(
                    AgentEvent("block.done", {"index": event.index, "block": event.block})
                )
            elif isinstance(event, MessageDone):
                final = event.message
        self._partial_text = {}
        self._partial_blocks = {}
        if final is None:
            raise ModelError(
                kind="stream_cut",
                message="The model's answer ended unexpectedly. Try again.",
                retryable=True,
                partial_content=[],
            )
        return final

    async def _store_partial(self, blocks: Sequence[dict[str, Any]]) -> None:
        kept = [b for b in blocks if b.get("type") == "text" and b.get("text", "").strip()]
        if kept:
            await self._store(
                StoredMessage(role="assistant", content=tuple(kept), meta={"partial": True})
            )

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
            from .transcript import unanswered_tool_uses

            open_uses = unanswered_tool_uses(self.history)
            if open_uses:
                await self._store(
                    StoredMessage(
                        role="user",
                        kind="tool_result",
                        content=tuple(
                            tool_result_block(b["id"], INTERRUPTED_RESULT, is_error=True)
                            for b in open_uses
                        ),
                    )
                )
        except Exception:  # never let cleanup hide the cancellation
            logger.exception("could not store the interrupted state")

    # -- tools ----------------------------------------------------------------------------

    async def _answer_tool_uses(self, tool_uses: Sequence[dict[str, Any]]) -> None:
        """Run every tool_use of the turn and answer them all in one user message."""
        results: list[dict[str, Any]] = []
        after: list[tuple[StoredMessage, Any]] = []
        try:
            for block in tool_uses:
                if block["name"] == SKILL_TOOL:
                    name, args = skill_call_input(block.get("input") or {})
                    outcome = await self._invoke_skill(
                        name, args, caller="model", tool_use_id=block["id"]
                    )
                    if outcome.ok and self._forks(name):
                        forked = await self._run_fork(name, outcome)
                        text = forked.text if forked.ok else f"Error: {forked.error}"
                        results.append(tool_result_block(block["id"], text, is_error=not forked.ok))
                    elif outcome.ok:
                        results.append(tool_result_block(block["id"], f"Launching skill: {name}"))
                        after.extend((m, outcome.invocation) for m in outcome.messages)
                    else:
                        results.append(
                            tool_result_block(block["id"], f"Error: {outcome.error}", is_error=True)
                        )
                    await self.emit(
                        AgentEvent(
                            "tool.result",
                            {
                                "tool_use_id": block["id"],
                                "name": SKILL_TOOL,
                                "is_error": not outcome.ok,
                                "content": results[-1]["content"],
                                "skill": name,
                            },
                        )
                    )
                    continue
                if self._is_profile_tool(block["name"]):
                    answer, extra = await self._profile_tool(block)
                    if answer is not None:
                        results.append(answer)
                    after.extend(extra)
                    continue
                result = await self._run_tool(block)
                results.append(
                    tool_result_block(block["id"], result.content, is_error=result.is_error)
                )
        except asyncio.CancelledError:
            answered = {r["tool_use_id"] for r in results}
            results.extend(
                tool_result_block(b["id"], INTERRUPTED_RESULT, is_error=True)
                for b in tool_uses
                if b["id"] not in answered
            )
            await self._store(
                StoredMessage(role="user", kind="tool_result", content=tuple(results))
            )
            for message, invocation in after:
                await self._store(message, invocation=invocation)
            raise
        if results:
            await self._store(
                StoredMessage(role="user", kind="tool_result", content=tuple(results))
            )
        for message, invocation in after:
            await self._store(message, invocation=invocation)

    async def _run_tool(self, block: dict[str, Any]) -> ToolResult:
        name = block["name"]
        tool_input = block.get("input") or {}
        tool = self.tools.get(name)
        payload = {
            "tool_name": name,
            "tool_input": tool_input,
            "tool_use_id": block["id"],
            "session_id": self.config.session_id,
            "active_skills": list(self.state.active_skills),
            "invocation": self.state.current_invocation,
        }
        decision: Decision | None = None
        if tool is None or name in self.state.disallowed_tools:
            result = ToolResult(
                content=f'Error: unknown tool "{name}". Available tools: '
                + ", ".join(n for n in self.tools.names() if n not in self.state.disallowed_tools),
                is_error=True,
            )
        elif block.get("input_error"):
            result = ToolResult(content=f"Error: {block['input_error']}", is_error=True)
        else:
            blocked = await self.hooks.first_block("PreToolUse", payload)
            if blocked:
                result = ToolResult(content=f"Blocked by a hook: {blocked.reason}", is_error=True)
            else:
                await self.emit(
                    AgentEvent(
                        "tool.call", {"tool_use_id": block["id"], "name": name, "input": tool_input}
                    )
                )
                decision = await self.decide(ToolCall(tool=name, input=tool_input), self.state)
                if decision.behavior != "allow":
                    result = ToolResult(
                        content=f"Permission denied: {decision.reason}", is_error=True
                    )
                else:
                    try:
                        result = await tool.run(tool_input, self.tool_context)
                    except asyncio.CancelledError:
                        raise
                    except Exception as exc:  # a tool failure is a result the model can read
                        message = str(exc) or exc.__class__.__name__
                        result = ToolResult(content=f"Error: {message}", is_error=True)
        await self.hooks.run(
            "PostToolUse",
            {**payload, "result": result, "decision": decision},
        )
        await self.emit(
            AgentEvent(
                "tool.result",
                {
                    "tool_use_id": block["id"],
                    "name": name,
                    "is_error": result.is_error,
                    "content": result.content,
                    "artifacts": list(result.artifacts),
                    "decision": decision.behavior if decision else None,
                    "reason": decision.reason if decision else None,
                },
            )
        )
        return result

    # -- skills ---------------------------------------------------------------------------

    async def _invoke_skill(
        self, name: str, args: str, *, caller: str, tool_use_id: str | None
    ) -> SkillOutcome:
        """Validate, check `Skill(NAME)`, render and describe the two messages; audit every attempt."""
        audit: dict[str, Any] = {
            "skill": name,
            "args": args,
            "caller": caller,
            "tool_use_id": tool_use_id or "",
        }
        spec: SkillSpec | None = None
        try:
            spec = validate_invocation(
                name, caller=caller, lookup=self.skills.get, reserved=self.tools.names()
            )
            audit.update(source=spec.source, digest=spec.digest)
            call = ToolCall(tool=SKILL_TOOL, input={"skill": name, "args": args})
            decision = await self.decide(call, self.state)
            audit["decided_by"] = decision.reason
            audit["approval"] = getattr(decision, "approval", None)
            if decision.behavior != "allow":
                raise SkillInvocationError(
                    PERMISSION_DENIED,
                    f'Permission to use the skill "{name}" was denied: {decision.reason}',
                )
            try:
                skill_dir = await self.stage_skill(spec)
                rendered = await self._render_body(spec, args, skill_dir)
                hidden = rendered.text
            except DynamicContextError as exc:
                audit["shell_commands"] = [r.as_audit() for r in exc.runs]
                raise SkillInvocationError(exc.code, exc.message) from exc
            except Exception as exc:
                logger.warning("skill %s cannot be loaded", name, exc_info=True)
                raise SkillInvocationError(
                    CANNOT_LOAD, f'The skill "{name}" cannot be loaded: {exc}'
                ) from exc
            self.tool_context = replace(
                self.tool_context, env={**self.tool_context.env, "SKILL_DIR": skill_dir}
            )
        except SkillInvocationError as exc:
            audit.update(decision="denied" if exc.code == PERMISSION_DENIED else "failed")
            audit.update(error_code=exc.code, error=exc.message)
            await self._audit(audit)
            return SkillOutcome(ok=False, error=exc.message, code=exc.code)

        already = any(
            m.kind == "skill_prompt" and m.to_model and m.plain_text == hidden for m in self.history
        )
        skill_hooks, hook_notes = parse_skill_hooks(spec.name, spec.hooks)
        for note in hook_notes:
            logger.warning("skill %s: %s", spec.name, note)
        allowed = _skill_rules(spec, "allow", skill_dir)
        denied = _skill_rules(spec, "deny", skill_dir)
        self.state.active_skills.append(spec.name)
        self.state.skill_rules.extend(allowed + denied)
        self.state.disallowed_tools.update(r.tool for r in denied if r.specifier is None)
        if spec.model:
            self.state.model_override = spec.model
        status = status_message_text(spec.name, args)
        injected = ALREADY_LOADED.format(name=spec.name) if already else hidden
        audit.update(
            decision="allowed",
            status_text=status,
            injected_text=injected,
            allowed_tools=[r.text for r in allowed],
            disallowed_tools=[r.text for r in denied],
            model_override=spec.model or "",
            already_loaded=already,
            skill_dir=skill_dir,
            shell_commands=[r.as_audit() for r in rendered.runs],
            hooks=[h.as_dict() for h in skill_hooks],
        )
        invocation = await self._audit(audit)
        self.register_skill_hooks(skill_hooks)
        self.state.current_invocation = invocation
        self.state.invocation_refs[spec.name] = invocation
        messages = [
            StoredMessage.text(
                "user", status, kind="skill_status", meta={"skill": spec.name, "args": args}
            ),
            StoredMessage.text(
                "user", injected, kind="skill_prompt", is_meta=True, meta={"skill": spec.name}
            ),
        ]
        if allowed or denied or spec.model:
            messages.append(
                StoredMessage.text(
                    "user",
                    _permissions_record(spec, allowed, denied),
                    kind="permissions",
                    is_meta=True,
                    to_model=False,
                    meta={"skill": spec.name},
                )
            )
        return SkillOutcome(ok=True, messages=messages, invocation=invocation)

    async def _render_body(self, spec: SkillSpec, args: str, skill_dir: str) -> DynamicRender:
        """The hidden message, with `!` commands run under the rules the skill's turn would have."""
        state = TurnState(
            active_skills=[*self.state.active_skills, spec.name],
            skill_rules=[
                *self.state.skill_rules,
                *_skill_rules(spec, "allow", skill_dir),
                *_skill_rules(spec, "deny", skill_dir),
            ],
        )
        ctx = replace(self.tool_context, env={**self.tool_context.env, "SKILL_DIR": skill_dir})
        check = self.check

        async def allowed(command: str) -> Decision:
            assert check is not None
            return await check(ToolCall(tool="Bash", input={"command": command}), state)

        return await render_dynamic(
            spec,
            args,
            skill_dir=skill_dir,
            session_id=self.config.session_id,
            check=allowed if check else None,
            execute=lambda command: run_shell(command, ctx, bash=self._bash_tool()),
            disabled=self.config.disable_skill_shell,
        )

    def register_skill_hooks(self, skill_hooks: Sequence[SkillHook]) -> list[SkillHook]:
        """Run these skill hooks from now on (each once, however often it is registered)."""
        return self.skill_hooks.register(skill_hooks)

    async def _check_hook_command(self, command: str, skill: str) -> Decision:
        # Admin rules (also those scoped to the hook's skill) and grants; not the skill's own
        # allowed-tools: a hook outlives the turn of its skill and must not approve itself.
        assert self.check is not None
        state = TurnState(active_skills=[skill])
        return await self.check(ToolCall(tool="Bash", input={"command": command}), state)

    def _bash_tool(self) -> BashTool:
        tool = self.tools.get("Bash")
        return tool if isinstance(tool, BashTool) else BashTool()

    async def _audit(self, data: dict[str, Any]) -> Any:
        results = await self.hooks.run("SkillInvocation", data)
        await self.emit(
            AgentEvent("skill.invocation", {k: v for k, v in data.items() if k != "approval"})
        )
        for result in results:
            if result.value is not None:
                return result.value
        return None


def compose_request(
    history: Sequence[StoredMessage],
    *,
    tools: ToolRegistry,
    skills: SkillProvider,
    config: AgentConfig,
    state: TurnState | None = None,
) -> ModelRequest:
    """A pure function of the stored rows and the turn's context."""
    state = state or TurnState()
    schemas = [s for s in tools.schemas() if s["name"] not in state.disallowed_tools]
    system = config.system_prompt
    skills_allowed = SKILL_TOOL not in state.disallowed_tools
    invocable = [s for s in skills.skills() if s.model_invocable] if skills_allowed else []
    if config.profile == TOOL_RESULT:
        if skills_allowed:
            schemas.append(LOAD_SKILL_TOOL)
            system = tool_result_system(system, invocable)
    elif config.profile == SYSTEM_PROMPT_PROFILE:
        if skills_allowed:
            schemas.extend(TOOLSET)
        system = toolset_system(system, invocable, history)
    elif skills_allowed:
        schemas.append(
            skill_tool_schema(
                invocable, budget=config.catalog_budget, entry_cap=config.catalog_entry_cap
            )
        )
    return ModelRequest(
        model=state.model_override or config.model,
        system=system,
        tools=schemas,
        messages=to_api_messages(history),
        max_tokens=config.max_tokens,
    )


@dataclass(frozen=True, slots=True)
class ForkResult:
    """What a subagent hands back: its final text, or why it failed."""

    ok: bool
    text: str = ""
    error: str = ""
    run: Any = None


@dataclass(frozen=True, slots=True)
class SkillOutcome:
    ok: bool
    messages: list[StoredMessage] = field(default_factory=list)
    invocation: Any = None
    error: str = ""
    code: str = ""


def _keep_block(block: dict[str, Any]) -> bool:
    return not (block.get("type") == "text" and not block.get("text"))


_SKILL_DIR_VAR = re.compile(r"\$\{CLAUDE_SKILL_DIR\}")


def _skill_rules(spec: SkillSpec, behavior: str, skill_dir: str) -> list[Rule]:
    texts = spec.allowed_tools if behavior == "allow" else spec.disallowed_tools
    rules: list[Rule] = []
    for text in texts:
        # ${CLAUDE_SKILL_DIR} in a rule lets a skill pre-approve its own scripts by path.
        resolved = _SKILL_DIR_VAR.sub(lambda _m: skill_dir, text)
        try:
            rules.append(parse_rule(resolved, behavior, source="skill", scope_skill=spec.name))
        except RuleSyntaxError as exc:
            logger.warning("skill %s: ignoring malformed rule %r: %s", spec.name, text, exc)
    return rules


def _permissions_record(spec: SkillSpec, allowed: list[Rule], denied: list[Rule]) -> str:
    lines = [f'Applied for the rest of this turn by the skill "{spec.name}":']
    if allowed:
        lines.append("allowed-tools: " + ", ".join(r.text for r in allowed))
    if denied:
        lines.append("disallowed-tools: " + ", ".join(r.text for r in denied))
    if spec.model:
        lines.append(f"model: {spec.model}")
    return "\n".join(lines)


__all__ = [
    "HIDDEN_PREFIX",
    "Agent",
    "AgentConfig",
    "AgentEvent",
    "HookResult",
    "RunOutcome",
    "TurnState",
]
