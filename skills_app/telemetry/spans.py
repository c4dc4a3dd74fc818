"""Runs, model calls, skill activations and tool calls as spans, following the OpenTelemetry
GenAI semantic conventions at SEMCONV_VERSION (attribute names written out here, so an upgrade
of the SDK's semconv package cannot rename them under us):

- a run is an `invoke_agent` span (`gen_ai.operation.name`, `gen_ai.agent.name`,
  `gen_ai.conversation.id`, `gen_ai.request.model`, `gen_ai.provider.name` = anthropic);
  a forked skill's subagent run is one too, the child of its parent run's span;
- each model call is a `chat {model}` client span under it, with `gen_ai.request.model`,
  `gen_ai.response.model`, `gen_ai.response.id`, `gen_ai.response.finish_reasons` and the
  `gen_ai.usage.*` token counts (`error.type` when it failed);
- each tool call is an `execute_tool {name}` span with `gen_ai.tool.name`,
  `gen_ai.tool.call.id`, `gen_ai.tool.type`, and the permission decision and its reason as
  `skillscope.permission.decision` / `.reason`, the skill it ran under as `skillscope.skill.name`,
  and what the tool adds of itself (an MCP call: `skillscope.mcp.server`, `.tool`,
  `.definition_hash`, `.result_chars`, `.truncated`, `.duration_ms`); an MCP call's arguments
  are kept filtered (secrets masked, hidden text withheld) before any observer sees them;
- each skill activation (by the model's Skill tool or the user's /name) is an `invoke_skill
  {name}` span (no GenAI convention covers skills) with `skillscope.skill.name`,
  `skillscope.skill.caller` and the decision.

Hidden text (the injected skill prompt, tool inputs and results, the request's messages) goes on
spans only with `include_hidden`, as the GenAI conventions' opt-in content attributes
(`gen_ai.input.messages`, `gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`) and the
skill's arguments.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from skills_app.core.events import (
    ModelCalled,
    RunFinished,
    RunStarted,
    SkillInvoked,
    SubagentFinished,
    SubagentStarted,
    ToolCalled,
    ToolFinished,
)
from skills_app.runs.observers import ModelCallEnded, Observed, RunContext

SEMCONV_VERSION = "1.44.0"
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
PROVIDER = "anthropic"
AGENT_NAME = "skillscope"
# Spans of runs this process has not seen end (a crashed task): the oldest are closed first.
MAX_OPEN_RUNS = 1000

# GenAI semantic conventions (SEMCONV_VERSION).
OPERATION = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
AGENT = "gen_ai.agent.name"
CONVERSATION = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ = "gen_ai.usage.cache_read.input_tokens"
CACHE_CREATION = "gen_ai.usage.cache_creation.input_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
INPUT_MESSAGES = "gen_ai.input.messages"
ERROR_TYPE = "error.type"
# Ours: no convention covers skills or permission decisions.
SKILL = "skillscope.skill.name"
SKILL_CALLER = "skillscope.skill.caller"
SKILL_ARGS = "skillscope.skill.args"
DECISION = "skillscope.permission.decision"
REASON = "skillscope.permission.reason"
RUN_ID = "skillscope.run.id"
RUN_STATUS = "skillscope.run.status"
USER_ID = "skillscope.user.id"
MODEL_CALL = "skillscope.model_call.number"


@dataclass(slots=True)
class _RunSpans:
    root: Span
    model: Span | None = None
    tools: dict[str, Span] = field(default_factory=dict)
    # The skill the latest model call was made under (its tool calls are that skill's).
    skill: str = ""


class GenAiTracer:
    """The run observer that turns a run's events into spans (see the module docstring)."""

    def __init__(self, tracer: Tracer, *, include_hidden: bool = False) -> None:
        self.provider: Any = None  # the SDK provider that owns `tracer`, to shut it down
        self.tracer = tracer
        self.include_hidden = include_hidden
        self.runs: OrderedDict[int, _RunSpans] = OrderedDict()
        self.parents: dict[int, int] = {}  # subagent run -> parent run

    def __call__(self, context: RunContext, event: Observed) -> None:
        if isinstance(event, SubagentStarted):
            self.parents[event.run_id] = event.parent_run_id
            return
        if isinstance(event, RunFinished | SubagentFinished):
            self._end_run(event.run_id, event.status, getattr(event, "error", ""))
            return
        spans = self._run(context, event)
        if isinstance(event, ModelCalled):
            self._end_model(spans)
            spans.skill = event.skill
            spans.model = self._child(
                spans,
                f"chat {event.model}",
                SpanKind.CLIENT,
                {
                    OPERATION: "chat",
                    PROVIDER_NAME: PROVIDER,
                    REQUEST_MODEL: event.model,
                    MODEL_CALL: event.call,
                    **({SKILL: event.skill} if event.skill else {}),
                    **self._request_content(event.request),
                },
            )
        elif isinstance(event, ModelCallEnded):
            self._model_ended(spans, event)
        elif isinstance(event, ToolCalled):
            attributes: dict[str, Any] = {
                OPERATION: "execute_tool",
                TOOL_NAME: event.name,
                TOOL_CALL_ID: event.tool_use_id,
                TOOL_TYPE: "function",
            }
            if self.include_hidden:
                attributes[TOOL_ARGUMENTS] = json.dumps(event.input, ensure_ascii=False)
            spans.tools[event.tool_use_id] = self._child(
                spans, f"execute_tool {event.name}", SpanKind.INTERNAL, attributes
            )
        elif isinstance(event, ToolFinished):
            self._tool_finished(spans, event)
        elif isinstance(event, SkillInvoked):
            self._skill(spans, event)

    # -- runs ----------------------------------------------------------------------------------

    def _run(self, context: RunContext, event: Observed) -> _RunSpans:
        spans = self.runs.get(context.run_id)
        if spans is not None:
            return spans
        parent = self.runs.get(self.parents.get(context.run_id, -1))
        ctx = trace.set_span_in_context(parent.root) if parent is not None else None
        model = event.model if isinstance(event, RunStarted | ModelCalled) else ""
        root = self.tracer.start_span(
            f"invoke_agent {AGENT_NAME}",
            context=ctx,
            kind=SpanKind.INTERNAL,
            attributes={
                OPERATION: "invoke_agent",
                PROVIDER_NAME: PROVIDER,
                AGENT: AGENT_NAME,
                CONVERSATION: str(context.conversation_id),
                RUN_ID: context.run_id,
                USER_ID: context.user_id,
                **({REQUEST_MODEL: model} if model else {}),
            },
        )
        spans = self.runs[context.run_id] = _RunSpans(root)
        while len(self.runs) > MAX_OPEN_RUNS:
            run_id, _ = next(iter(self.runs.items()))
            self._end_run(run_id, "unknown", "")
        return spans

    def _end_run(self, run_id: int, status: str, error: str) -> None:
        spans = self.runs.pop(run_id, None)
        self.parents.pop(run_id, None)
        if spans is None:
            return
        self._end_model(spans)
        for span in spans.tools.values():
            span.set_status(Status(StatusCode.ERROR, "the run ended before the tool returned"))
            span.end()
        spans.root.set_attribute(RUN_STATUS, status)
        if status in ("failed", "interrupted"):
            spans.root.set_attribute(ERROR_TYPE, status)
            # The run's error is our own message (a model error's kind and advice), never
            # content; it is still left off unless content is allowed, being free text.
            spans.root.set_status(
                Status(StatusCode.ERROR, error[:200] if self.include_hidden else status)
            )
        spans.root.end()

    def _child(
        self, spans: _RunSpans, name: str, kind: SpanKind, attributes: dict[str, Any]
    ) -> Span:
        ctx = trace.set_span_in_context(spans.root)
        return self.tracer.start_span(name, context=ctx, kind=kind, attributes=attributes)

    # -- model calls ---------------------------------------------------------------------------

    def _request_content(self, request: Any) -> dict[str, Any]:
        if not self.include_hidden or request is None:
            return {}
        messages = getattr(request, "messages", None)
        return {INPUT_MESSAGES: json.dumps(messages, ensure_ascii=False, default=str)}

    def _model_ended(self, spans: _RunSpans, event: ModelCallEnded) -> None:
        span = spans.model
        if span is None:
            return
        if event.error_kind:
            span.set_attribute(ERROR_TYPE, event.error_kind)
            span.set_status(Status(StatusCode.ERROR, event.error_kind))
        else:
            if event.model:
                span.set_attribute(RESPONSE_MODEL, event.model)
            if event.response_id:
                span.set_attribute(RESPONSE_ID, event.response_id)
            if event.stop_reason:
                span.set_attribute(FINISH_REASONS, [event.stop_reason])
            for key, name in (
                ("input_tokens", INPUT_TOKENS),
                ("output_tokens", OUTPUT_TOKENS),
                ("cache_read_input_tokens", CACHE_READ),
                ("cache_creation_input_tokens", CACHE_CREATION),
            ):
                value = event.usage.get(key)
                if isinstance(value, int) and not isinstance(value, bool):
                    span.set_attribute(name, value)
        span.end()
        spans.model = None

    def _end_model(self, spans: _RunSpans) -> None:
        if spans.model is not None:
            spans.model.end()
            spans.model = None

    # -- tools and skills ------------------------------------------------------------------------

    def _tool_span(self, spans: _RunSpans, tool_use_id: str, name: str) -> Span:
        """The open span of a call; a call announced only when it ended gets one now."""
        span = spans.tools.get(tool_use_id)
        if span is None:
            attributes = {
                OPERATION: "execute_tool",
                TOOL_CALL_ID: tool_use_id,
                TOOL_TYPE: "function",
            }
            if name:
                attributes[TOOL_NAME] = name
            span = spans.tools[tool_use_id] = self._child(
                spans, f"execute_tool {name}".strip(), SpanKind.INTERNAL, attributes
            )
        return span

    def _tool_finished(self, spans: _RunSpans, event: ToolFinished) -> None:
        # The skill tool is announced only by its end (and its activation before that).
        span = self._tool_span(spans, event.tool_use_id, event.name)
        spans.tools.pop(event.tool_use_id, None)
        span.update_name(f"execute_tool {event.name}")
        span.set_attribute(TOOL_NAME, event.name)
        if event.decision:
            span.set_attribute(DECISION, event.decision)
        if event.reason:
            span.set_attribute(REASON, event.reason)
        if event.skill or spans.skill:
            span.set_attribute(SKILL, event.skill or spans.skill)
        if self.include_hidden:
            span.set_attribute(TOOL_RESULT, event.content)
        for key, value in event.telemetry.items():
            span.set_attribute(key, value)
        if event.is_error:
            span.set_attribute(ERROR_TYPE, "tool_error")
            span.set_status(Status(StatusCode.ERROR))
        span.end()

    def _skill(self, spans: _RunSpans, event: SkillInvoked) -> None:
        parent = spans.root
        if event.tool_use_id:
            # The model's skill tool call: its span holds the activation and its decision.
            parent = self._tool_span(spans, event.tool_use_id, "")
            parent.set_attribute(DECISION, event.decision)
            parent.set_attribute(SKILL, event.skill)
        attributes: dict[str, Any] = {
            OPERATION: "invoke_skill",
            SKILL: event.skill,
            SKILL_CALLER: event.caller,
            DECISION: event.decision,
        }
        if event.tool_use_id:
            attributes[TOOL_CALL_ID] = event.tool_use_id
        if self.include_hidden and event.args:
            attributes[SKILL_ARGS] = event.args
        span = self.tracer.start_span(
            f"invoke_skill {event.skill}",
            context=trace.set_span_in_context(parent),
            attributes=attributes,
        )
        if event.error:
            span.set_attribute(ERROR_TYPE, "skill_refused")
            span.set_status(Status(StatusCode.ERROR))
        span.end()
