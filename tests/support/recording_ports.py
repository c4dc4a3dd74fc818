"""The core's ports in memory: drive `core.runner.Runner` without Django, HTTP or a database.

- `ScriptedModel` is a `ModelClient` that answers from scripted `Reply`s (the fake Anthropic
  server's, `tests/support/fake_anthropic_replies.py`) and checks every request with the fake server's own
  rules (`tests/support/fake_anthropic_rules.py`): a request the API would reject (a tool_result that does
  not follow its tool_use, empty content, an unknown model, a changed thinking block...) is
  answered with the API's 400 and recorded in `rejected`, so a test sees the core send it.
  Thinking, refusals (`REFUSE_DIRECTIVE`), prompt-cache usage and the faults of a `Reply`
  (`cut_after_events`, `no_message_stop`, invalid tool JSON, a pause) behave as the server's do;
  an error reply becomes the `ModelError` the real adapter raises for that status.
- `RecordingPorts` implements `RunPorts`: the admin's rules decide tool calls with the core's
  `decide`, an `ask` is answered by a scripted answer (or waits for the test), rows and events
  are kept in lists, skills are staged into a real workspace folder, forks run a subagent Runner.
- `Chat` plays the services around them: it stores the user's message before each run (a slash
  command as the person typed it), builds the Runner of each turn (`core.agent.Agent`) as
  `runs/factory.py` does, and keeps the rows across turns.

Like the openai-agents `FakeModel`, it makes the loop testable in milliseconds; the thin layer
that proves the services wire the same loop to the real SDK, database and channel layer is
`tests/runs/test_agent_loop.py`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from skills_app.core.agent import (
    Agent,
    AgentConfig,
    ForkResult,
    InvocationRef,
    RunOutcome,
    SkillProvider,
    TurnState,
)
from skills_app.core.events import (
    ApprovalAnswered,
    ApprovalRequested,
    BlockDone,
    BlockStarted,
    MessageDone,
    ModelCalled,
    ModelEvent,
    RunEvent,
    TextDelta,
    ThinkingDelta,
    TurnExcluded,
)
from skills_app.core.hooks import Hooks
from skills_app.core.llm import ModelError, ModelRequest
from skills_app.core.llm_errors import status_error
from skills_app.core.model_catalog import DEFAULT_MODEL
from skills_app.core.permissions import (
    Decision,
    PermissionContext,
    Rule,
    ToolCall,
    call_as_rule_text,
    decide,
    grant_rule_for,
    parse_rule,
    read_filter,
    removed_tools,
)
from skills_app.core.ports import InvocationRecord, ToolAudit
from skills_app.core.profiles import slash_invokes
from skills_app.core.registry import SkillRegistry, SkillSource
from skills_app.core.runner import Runner
from skills_app.core.skillfile import SkillSpec
from skills_app.core.skillhooks import skill_hooks_from_rows
from skills_app.core.skilltool import parse_slash_command
from skills_app.core.tools import ToolContext, default_tools
from skills_app.core.tools.workspace import Workspace
from skills_app.core.transcript import StoredMessage, exclude_turn, turn_start
from tests.support.fake_anthropic import REFUSE_DIRECTIVE
from tests.support.fake_anthropic_cache import PromptCache, render_blocks
from tests.support.fake_anthropic_replies import (
    Reply,
    last_user_text,
    next_id,
    signed,
    with_thinking,
)
from tests.support.fake_anthropic_rules import (
    ThinkingLedger,
    model_info,
    not_found_message,
    thinking_display,
    thinking_on,
    validate_cache_control,
    validate_request,
    validate_settings,
)

ALLOW_ONCE, ALLOW_CONVERSATION, DENY = "allow_once", "allow_conversation", "deny"


@dataclass(slots=True)
class Call:
    """One request the model received, as the API would have seen it."""

    request: ModelRequest
    body: dict[str, Any]
    status: int = 0
    rejection: str = ""

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = self.body["messages"]
        return messages

    @property
    def system_text(self) -> str:
        system = self.body.get("system") or ""
        if isinstance(system, str):
            return system
        return "".join(b.get("text", "") for b in system)

    @property
    def tool_names(self) -> list[str]:
        return [t["name"] for t in self.body.get("tools", [])]

    def tool(self, name: str) -> dict[str, Any]:
        return next(t for t in self.body.get("tools", []) if t["name"] == name)

    def count(self, needle: str) -> int:
        return json.dumps(self.messages, ensure_ascii=False).count(needle)


class ScriptedModel:
    """A `ModelClient` answering from a script, as strict about requests as the fake server."""

    is_demo = False

    def __init__(self, model: str = DEFAULT_MODEL) -> None:
        self.model = model
        self.label = f"Scripted ({model})"
        self.calls: list[Call] = []
        self._replies: list[Reply] = []
        self._responder: Callable[[Call], Reply] | None = None
        self.cache = PromptCache()
        self.thinking = ThinkingLedger()

    def enqueue(self, *replies: Reply) -> None:
        self._replies.extend(replies)

    def set_responder(self, responder: Callable[[Call], Reply] | None) -> None:
        """Answer with responder(call) whenever no scripted reply is left."""
        self._responder = responder

    @property
    def accepted(self) -> list[Call]:
        return [c for c in self.calls if c.status == 200]

    @property
    def rejected(self) -> list[Call]:
        return [c for c in self.calls if c.rejection]

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        body = request.as_kwargs()
        # The body as it would travel: JSON, so nothing that is not JSON slips through.
        body = json.loads(json.dumps(body))
        call = Call(request, body)
        self.calls.append(call)
        reason = validate_request(body)
        if reason:
            raise self._reject(call, 400, "invalid_request_error", reason)
        info = model_info(body)
        if info is None:
            raise self._reject(call, 404, "not_found_error", not_found_message(body))
        thinks = thinking_on(body, info)
        reason = (
            validate_settings(body, info)
            or validate_cache_control(body)
            or self.thinking.check_replay(body, thinking=thinks)
        )
        if reason:
            raise self._reject(call, 400, "invalid_request_error", reason)
        reply = Reply.refusal() if REFUSE_DIRECTIVE in last_user_text(body) else self._next(call)
        if reply.status != 200:
            call.status = reply.status
            raise status_error(
                error_type=reply.error_type or "api_error",
                status_code=reply.status,
                detail=reply.error_message or "error",
                model=request.model,
                models=(),
                partial_content=[],
            )
        reply = signed(reply)
        if thinks:
            reply = with_thinking(reply, body, thinking_display(body, info))
        self.thinking.issue(list(reply.content))
        if reply.stop_reason == "refusal" and not reply.content:
            usage: dict[str, Any] = {
                "input_tokens": 0,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            }
        else:
            blocks = render_blocks(body, thinking=thinks)
            usage = self.cache.account(blocks, minimum=info.cache_min_tokens).as_usage()
        call.status = 200
        async for event in _stream(reply, body, usage):
            yield event

    def _next(self, call: Call) -> Reply:
        if self._replies:
            return self._replies.pop(0)
        if self._responder is not None:
            return self._responder(call)
        return Reply.error(500, "api_error", "The scripted model has no reply for this request.")

    def _reject(self, call: Call, status: int, error_type: str, reason: str) -> ModelError:
        call.status, call.rejection = status, reason
        return status_error(
            error_type=error_type,
            status_code=status,
            detail=reason,
            model=call.request.model,
            models=(),
            partial_content=[],
        )


def _pieces(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


async def _stream(
    reply: Reply, body: dict[str, Any], usage: dict[str, Any]
) -> AsyncIterator[ModelEvent]:
    """The adapter's events for a reply, with its faults (counted in events sent)."""
    done: dict[int, dict[str, Any]] = {}
    writing: dict[int, list[str]] = {}
    sent = itertools.count()

    def partial() -> list[dict[str, Any]]:
        blocks = dict(done)
        for index, pieces in writing.items():
            if "".join(pieces):
                blocks[index] = {"type": "text", "text": "".join(pieces)}
        return [blocks[i] for i in sorted(blocks)]

    async def step(event: ModelEvent) -> ModelEvent:
        number = next(sent)
        if reply.cut_after_events is not None and number >= reply.cut_after_events:
            raise ModelError(
                "stream_cut",
                "The connection to the model was cut before the reply finished. "
                "What arrived so far was kept; try again.",
                partial_content=partial(),
            )
        if reply.wait_for is not None and number == reply.wait_after_events:
            if reply.reached is not None:
                reply.reached.set()
            waited = reply.wait_for.wait()
            if asyncio.iscoroutine(waited):
                await waited
        return event

    for index, block in enumerate(reply.content):
        kind = block["type"]
        if kind == "tool_use":
            yield await step(BlockStarted(index, kind, block["name"], block["id"]))
            raw = block.get("raw_json")
            try:
                parsed = json.loads(raw) if raw is not None else block["input"]
            except json.JSONDecodeError:
                parsed = None
            if not isinstance(parsed, dict):
                raise ModelError(
                    "invalid_tool_json",
                    "The model sent a tool call whose input is not valid JSON, so it was not "
                    "run. Try again.",
                    partial_content=partial(),
                )
            finished = {"type": "tool_use", "id": block["id"], "name": block["name"]}
            finished["input"] = parsed
        elif kind == "text":
            yield await step(BlockStarted(index, kind))
            writing[index] = []
            for piece in _pieces(block["text"], reply.chunk):
                event = await step(TextDelta(index, piece))
                writing[index].append(piece)  # it arrived (a cut piece never does)
                yield event
            del writing[index]
            finished = {"type": "text", "text": block["text"]}
        elif kind == "thinking":
            yield await step(BlockStarted(index, kind))
            for piece in _pieces(block["thinking"], reply.chunk):
                if piece:
                    yield await step(ThinkingDelta(index, piece))
            finished = dict(block)
        else:
            yield await step(BlockStarted(index, kind))
            finished = dict(block)
        done[index] = finished
        yield await step(BlockDone(index, finished))
    if reply.no_message_stop:
        raise ModelError(
            "stream_cut",
            "The connection to the model was cut before the reply finished. "
            "What arrived so far was kept; try again.",
            partial_content=partial(),
        )
    output_chars = sum(
        len(b.get("text") or b.get("thinking") or json.dumps(b.get("input", {})))
        for b in reply.content
    )
    message: dict[str, Any] = {
        "id": next_id("msg"),
        "model": reply.model or body["model"],
        "role": "assistant",
        "content": [done[i] for i in sorted(done)],
        "stop_reason": reply.stop_reason,
        "stop_sequence": reply.stop_sequence,
        "usage": {
            **usage,
            "output_tokens": reply.output_tokens
            if reply.output_tokens is not None
            else (output_chars // 4 + 1 if reply.content else 0),
        },
    }
    if reply.stop_details is not None:
        message["stop_details"] = reply.stop_details
    yield await step(MessageDone(message))


# -- the ports ------------------------------------------------------------------------------------

Answer = str | Callable[[ToolCall], Awaitable[str]]


@dataclass(slots=True)
class Asked:
    """An approval the run asked for, and how it was answered."""

    approval_id: int
    call: ToolCall
    decision: Decision
    answer: str = ""


@dataclass
class RecordingPorts:
    """`RunPorts` in memory: rules, answers, rows, events, audit records, staged skills."""

    model: ScriptedModel
    workspace: Workspace
    rules: list[Rule] = field(default_factory=list)
    # How an `ask` is answered: allow_once | allow_conversation | deny, or a coroutine function
    # of the call (it may wait for the test).
    answer: Answer = DENY
    rows: list[StoredMessage] = field(default_factory=list)
    events: list[RunEvent] = field(default_factory=list)
    invocations: list[InvocationRecord] = field(default_factory=list)
    tool_audits: list[tuple[InvocationRef, ToolAudit]] = field(default_factory=list)
    asked: list[Asked] = field(default_factory=list)
    grants: list[Rule] = field(default_factory=list)
    # The rows of each invocation (its status and hidden rows), by invocation reference.
    invocation_rows: dict[InvocationRef, list[StoredMessage]] = field(default_factory=dict)
    forker: Callable[[SkillSpec, str], Awaitable[ForkResult]] | None = None
    # A subagent's ports keep their rows from the parent model, as `SubagentPorts` does.
    subagent: bool = False

    def context(self, state: TurnState) -> PermissionContext:
        return PermissionContext(
            workspace=self.workspace.root,
            admin_rules=tuple(self.rules),
            active_skills=tuple(state.active_skills),
            skill_rules=tuple(state.skill_rules),
            grants=tuple(self.grants),
            readable_roots=(self.workspace.skills_dir,),
        )

    async def call_model(
        self, request: ModelRequest, *, call: int, skill: str
    ) -> AsyncIterator[ModelEvent]:
        # As the services' ports: announced, each event recorded before the runner sees it.
        self.events.append(ModelCalled(call, request.model, skill=skill, request=request))
        async for event in self.model.stream(request):
            if not isinstance(event, MessageDone):
                self.events.append(event)
            yield event

    async def decide(self, call: ToolCall, state: TurnState) -> Decision:
        decision = decide(call, self.context(state))
        if decision.behavior != "ask":
            return decision
        asked = Asked(len(self.asked) + 1, call, decision)
        self.asked.append(asked)
        skill = state.active_skills[-1] if state.active_skills else ""
        await self.emit(
            ApprovalRequested(
                approval_id=asked.approval_id,
                tool=call.tool,
                call=call_as_rule_text(call),
                rule=decision.rule.text if decision.rule else "",
                reason=decision.reason,
                skill=skill,
            )
        )
        try:
            asked.answer = self.answer if isinstance(self.answer, str) else await self.answer(call)
        except asyncio.CancelledError:
            asked.answer = "cancelled"
            raise
        await self.emit(ApprovalAnswered(approval_id=asked.approval_id, status=asked.answer))
        if asked.answer == ALLOW_CONVERSATION:
            self.grants.append(grant_rule_for(call))
        if asked.answer in (ALLOW_ONCE, ALLOW_CONVERSATION):
            result = Decision("allow", "approved by the user", None)
        else:
            result = Decision("deny", "denied by the user", None)
        return replace(result, approval_id=asked.approval_id)

    async def check(self, call: ToolCall, state: TurnState) -> Decision:
        return decide(call, self.context(state))

    async def record_message(
        self, message: StoredMessage, *, invocation: InvocationRef | None = None
    ) -> None:
        if self.subagent:
            message = replace(message, to_model=False, meta={**message.meta, "subagent": True})
        self.rows.append(message)
        if invocation is not None:
            self.invocation_rows.setdefault(invocation, []).append(message)

    async def exclude_turn(self, reason: str) -> None:
        if self.subagent:
            return
        changes = exclude_turn(self.rows, turn_start(self.rows), reason)
        for index, row in changes.items():
            self.rows[index] = row
        if changes:
            await self.emit(TurnExcluded(reason=reason))

    async def record_invocation(self, record: InvocationRecord) -> InvocationRef | None:
        self.invocations.append(record)
        return len(self.invocations)

    async def record_tool_call(self, invocation: InvocationRef, audit: ToolAudit) -> None:
        self.tool_audits.append((invocation, audit))

    async def path_filter(self, state: TurnState) -> Callable[[str], bool] | None:
        return read_filter(self.context(state))

    async def stage_skill(self, spec: SkillSpec) -> str:
        return str(self.workspace.stage_skill(spec.name, spec.path, spec.digest))

    async def emit(self, event: RunEvent) -> None:
        self.events.append(event)

    async def fork(self, spec: SkillSpec, prompt: str) -> ForkResult:
        if self.forker is None:
            return ForkResult(ok=False, error="A subagent cannot start another subagent.")
        return await self.forker(spec, prompt)

    # -- what tests read ------------------------------------------------------------------------

    def streamed_text(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, TextDelta))

    def kinds(self) -> list[tuple[str, str, bool]]:
        return [(r.role, r.kind, r.is_meta) for r in self.rows]


# -- the services around them ---------------------------------------------------------------------


class NoSkills:
    def get(self, name: str) -> SkillSpec | None:
        return None

    def skills(self) -> list[SkillSpec]:
        return []


class NoForks:
    """Subagents cannot fork again (as `runs.factory.NoForks`)."""

    def __init__(self, provider: SkillProvider, own: str) -> None:
        self.provider, self.own = provider, own

    def get(self, name: str) -> SkillSpec | None:
        spec = self.provider.get(name)
        if spec is not None and name == self.own:
            return replace(spec, context=None)
        return None if spec is None or spec.context == "fork" else spec

    def skills(self) -> list[SkillSpec]:
        return [s for s in self.provider.skills() if s.context != "fork"]


def rule(text: str, behavior: str = "allow", *, skill: str | None = None, rule_id: int = 0) -> Rule:
    """An admin rule, as an admin writes it."""
    return parse_rule(text, behavior, source="admin", rule_id=rule_id or None, scope_skill=skill)


class Chat:
    """One conversation's turns against the scripted model, with the services' part played."""

    def __init__(
        self,
        root: Path | None = None,
        *,
        skills_dir: Path | None = None,
        rules: Sequence[Rule] = (),
        answer: Answer = DENY,
        hooks: Hooks | None = None,
        model: ScriptedModel | None = None,
        sandbox: str = "auto",
        workspace: Workspace | None = None,
        skills: SkillProvider | None = None,
        agent_config: AgentConfig | None = None,
        subagent: bool = False,
        **config: Any,
    ) -> None:
        self.model = model or ScriptedModel()
        if workspace is None:
            assert root is not None, "a Chat needs a folder for its workspace"
            workspace = Workspace(root / "workspace")
        self.workspace = workspace
        if skills is None:
            skills = SkillRegistry([SkillSource("dirs", skills_dir)]) if skills_dir else NoSkills()
        self.skills: SkillProvider = skills
        self.hooks = hooks or Hooks()
        self.sandbox = sandbox
        self.config = agent_config or AgentConfig(
            model=self.model.model, session_id="session-1", prompt_caching=True, **config
        )
        self.ports = RecordingPorts(
            self.model,
            self.workspace,
            rules=list(rules),
            answer=answer,
            # A subagent cannot start another subagent.
            forker=None if subagent else self._fork,
            subagent=subagent,
        )
        self.runner: Runner | None = None
        self.subagents: list[Chat] = []

    @property
    def rows(self) -> list[StoredMessage]:
        return self.ports.rows

    @property
    def calls(self) -> list[Call]:
        return self.model.accepted

    def build(
        self, *, skills: SkillProvider | None = None, config: AgentConfig | None = None
    ) -> Runner:
        """The Runner of the next turn, built as `runs.factory.build_runner` builds it."""
        tools = default_tools()
        # A bare admin deny (e.g. "Bash") removes the tool from the request altogether.
        removed = removed_tools([*tools.names(), "Skill"], self.ports.context(TurnState()))
        # Hooks registered by earlier invocations, for skills still offered.
        hooks_before = [list(i.hooks) for i in self.ports.invocations if i.decision == "allowed"]
        skills = skills or self.skills
        agent = Agent(
            config=config or self.config,
            tools=tools.without(removed),
            skills=skills,
            tool_context=ToolContext(workspace=self.workspace, sandbox=self.sandbox),
            hooks=self.hooks,
            removed_tools=removed,
            skill_hooks=tuple(
                h for h in skill_hooks_from_rows(hooks_before) if skills.get(h.skill)
            ),
        )
        self.runner = Runner(agent, self.ports)
        return self.runner

    async def turn(self, text: str | None, **answer: Any) -> RunOutcome:
        """Store the user's message as the services do, then run the turn to its end."""
        if "answer" in answer:
            self.ports.answer = answer["answer"]
        if text is not None:
            command = parse_slash_command(text, lambda n: self.skills.get(n) is not None)
            # A slash command is kept for people, not the model (unless the profile's design
            # has no slash commands: then the model gets the text as typed).
            kept = command is not None and slash_invokes(self.config)
            self.ports.rows.append(
                StoredMessage.text("user", text, kind="command", to_model=False)
                if kept
                else StoredMessage.text("user", text)
            )
        outcome = await self.build().run(list(self.ports.rows), text)
        assert self.model.rejected == [], [c.rejection for c in self.model.rejected]
        return outcome

    async def _fork(self, spec: SkillSpec, prompt: str) -> ForkResult:
        """A subagent in memory, as `runs.forks` runs one: fresh rows, only its answer returns."""
        child = Chat(
            model=self.model,
            workspace=self.workspace,
            skills=NoForks(self.skills, spec.name),
            rules=self.ports.rules,
            answer=self.ports.answer,
            sandbox=self.sandbox,
            agent_config=replace(
                self.config,
                system_prompt=f'You are a subagent running the skill "{spec.name}".',
            ),
            subagent=True,
        )
        self.subagents.append(child)
        runner = child.build()
        first = runner.profile.fork_messages(spec.name, prompt)
        for row in first:
            await child.ports.record_message(row)
        outcome = await runner.run(first, None)
        final = next(
            (
                m.plain_text.strip()
                for m in reversed(runner.history)
                if m.role == "assistant" and m.sent_to_model and m.plain_text.strip()
            ),
            "",
        )
        if outcome.status != "done":
            return ForkResult(ok=False, text=final, error=outcome.error or "The subagent failed.")
        return ForkResult(ok=True, text=final or "(the subagent gave no final answer)", run=None)


__all__ = [
    "ALLOW_CONVERSATION",
    "ALLOW_ONCE",
    "DENY",
    "REFUSE_DIRECTIVE",
    "Call",
    "Chat",
    "RecordingPorts",
    "Reply",
    "ScriptedModel",
    "rule",
]
