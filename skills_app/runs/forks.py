"""Forked skills (`context: fork`): the skill runs as a subagent in a child run.

The subagent starts from a fresh message list whose first (hidden) user message is the rendered
skill; its rows are stored in the same conversation, linked to the child run and marked
`to_model=False`, so the parent model never sees them; the parent receives only the final text.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.utils import timezone

from skills_app.core.agent import Agent, AgentConfig, AgentEvent, ForkResult, SkillProvider
from skills_app.core.hooks import Hooks
from skills_app.core.llm import ModelClient
from skills_app.core.skillfile import SkillSpec
from skills_app.core.tools import ToolContext, default_tools
from skills_app.core.transcript import StoredMessage
from skills_app.models import Run
from skills_app.permissions.approvals import PermissionGate

logger = logging.getLogger(__name__)

# `agent:` presets: which base tools a subagent gets.
AGENT_PRESETS: dict[str, tuple[str, ...] | None] = {
    "general-purpose": None,  # every base tool
    "Explore": ("Read", "Glob", "Grep"),
    "Plan": ("Read", "Glob", "Grep"),
}
SUBAGENT_SYSTEM = (
    'You are a subagent running the skill "{name}" for another assistant. Follow the skill\'s '
    "instructions with the tools you have, then finish with a concise final answer: it is the only "
    "part the other assistant will see."
)


class NoForks:
    """A skill provider without forked skills: subagents cannot fork again."""

    def __init__(self, provider: SkillProvider) -> None:
        self.provider = provider

    def get(self, name: str) -> SkillSpec | None:
        spec = self.provider.get(name)
        return None if spec is None or spec.context == "fork" else spec

    def skills(self) -> list[SkillSpec]:
        return [s for s in self.provider.skills() if s.context != "fork"]


class _SubagentRecorder:
    """Wraps the run recorder: subagent rows are linked to the child run and kept from the parent."""

    def __init__(self, recorder: Any, child_run_id: int, skill: str) -> None:
        self.recorder = recorder
        self.child_run_id = child_run_id
        self.skill = skill

    async def __call__(self, event: AgentEvent) -> Any:
        if event.type == "message":
            message: StoredMessage = event.data["message"]
            stored = StoredMessage(
                role=message.role,
                content=message.content,
                kind=message.kind,
                is_meta=message.is_meta,
                to_model=False,
                meta={
                    **message.meta,
                    "subagent_run": self.child_run_id,
                    "subagent_skill": self.skill,
                },
            )
            event = AgentEvent("message", {**event.data, "message": stored})
        return await self.recorder(event)


def make_fork(
    *,
    conversation_id: int,
    parent_run_id: int,
    user_id: int,
    client: ModelClient,
    tool_context: ToolContext,
    skills: SkillProvider,
    config: AgentConfig,
    recorder_factory: Any,
    stage_skill: Any,
    check: Any = None,
) -> Any:
    """The `fork` callable the parent Agent uses for skills with `context: fork`."""

    async def fork(spec: SkillSpec, prompt: str) -> ForkResult:
        child = await Run.objects.acreate(
            conversation_id=conversation_id,
            parent_id=parent_run_id,
            model=spec.model or config.model,
            model_label=client.label,
            is_demo=client.is_demo,
        )
        recorder = recorder_factory(child.pk)
        emit = _SubagentRecorder(recorder, child.pk, spec.name)
        gate = PermissionGate(
            conversation_id=conversation_id,
            run_id=child.pk,
            user_id=user_id,
            workspace=tool_context.workspace,
            record=recorder.record,
        )
        tools = default_tools()
        preset = AGENT_PRESETS.get(spec.agent or "general-purpose")
        if preset is not None:
            tools = tools.without([n for n in tools.names() if n not in preset])
        hooks = Hooks()
        hooks.add("SkillInvocation", recorder.audit_skill)
        hooks.add("PostToolUse", recorder.audit_tool)
        recorder.gate = gate
        child_config = replace(
            config,
            model=spec.model or config.model,
            max_turns=settings.AGENT_MAX_TURNS,
            system_prompt=config.system_prompt + "\n\n" + SUBAGENT_SYSTEM.format(name=spec.name),
            profile="meta-message",
        )
        agent = Agent(
            client=client,
            tools=tools,
            tool_context=tool_context,
            skills=NoForks(skills),
            decide=gate.decide,
            emit=emit,
            stage_skill=stage_skill,
            config=child_config,
            hooks=hooks,
            check=check,
        )
        await recorder.record(
            "subagent.started",
            {"run_id": child.pk, "parent_run_id": parent_run_id, "skill": spec.name},
        )
        first = StoredMessage.text(
            "user", prompt, kind="skill_prompt", is_meta=True, meta={"skill": spec.name}
        )
        await emit(AgentEvent("message", {"message": first}))
        status, error = Run.DONE, ""
        try:
            outcome = await agent.run([first], None)
            if outcome.status == "failed":
                status, error = Run.FAILED, outcome.error
        except Exception as exc:  # the parent gets an error result, never a crash
            logger.exception("subagent run %s failed", child.pk)
            status, error = Run.FAILED, f"The subagent failed: {exc}"
        finally:
            await recorder.flush()
        final = _final_text(agent.history)
        await Run.objects.filter(pk=child.pk).aupdate(
            status=status, error=error, finished_at=timezone.now(), model_calls=agent.model_calls
        )
        await recorder.record(
            "subagent.finished",
            {
                "run_id": child.pk,
                "parent_run_id": parent_run_id,
                "skill": spec.name,
                "status": status,
            },
        )
        if status != Run.DONE:
            return ForkResult(
                ok=False, text=final, error=error or "The subagent failed.", run=child.pk
            )
        return ForkResult(
            ok=True, text=final or "(the subagent gave no final answer)", run=child.pk
        )

    return fork


def _final_text(history: list[StoredMessage]) -> str:
    for message in reversed(history):
        if message.role == "assistant" and message.to_model and message.plain_text.strip():
            return message.plain_text.strip()
    return ""


async def stage_in(workspace: Any, spec: SkillSpec) -> str:
    return str(await sync_to_async(workspace.stage_skill)(spec.name, spec.path, spec.digest))
