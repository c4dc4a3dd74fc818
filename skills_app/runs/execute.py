"""Executing one run: build the agent for it, run it to the end and record how it ended."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.utils import timezone
from django.utils.module_loading import import_string

from skills_app.core.agent import Agent, RunOutcome, TurnState
from skills_app.core.hooks import Hooks
from skills_app.core.llm import ModelClient
from skills_app.core.permissions import Decision, ToolCall, decide
from skills_app.core.skillfile import SkillSpec
from skills_app.core.skillhooks import skill_hooks_from_rows
from skills_app.core.tools import ToolContext, default_tools
from skills_app.core.tools.workspace import Workspace
from skills_app.models import Run, SkillInvocation
from skills_app.permissions.approvals import PermissionGate
from skills_app.runs import forks, store
from skills_app.runs.client import model_client
from skills_app.runs.recorder import RunRecorder

logger = logging.getLogger(__name__)


def workspace_for(conversation_id: int) -> Workspace:
    return Workspace.for_conversation(settings.WORKSPACE_ROOT, conversation_id)


def settings_hooks() -> Hooks:
    """Hooks configured by dotted paths in settings.AGENT_HOOKS."""
    hooks = Hooks()
    for event, paths in settings.AGENT_HOOKS.items():
        for path in paths:
            hooks.add(event, import_string(path))
    return hooks


def _stored_skill_hooks(conversation_id: int, skills: Any) -> list[Any]:
    """Hooks registered by earlier invocations in this conversation, for skills still offered."""
    stored = SkillInvocation.objects.filter(
        conversation_id=conversation_id, decision="allowed"
    ).order_by("pk")
    hooks = skill_hooks_from_rows(stored.values_list("hooks", flat=True))
    return [h for h in hooks if skills.get(h.skill) is not None]


async def execute_run(
    run_id: int,
    text: str | None,
    *,
    user_id: int,
    client: ModelClient | None = None,
    auto_answer: str | None = None,
) -> RunOutcome | None:
    """Run the agent loop for an existing Run row to completion, recording everything."""
    client = client or model_client()
    run = await Run.objects.select_related("conversation").aget(pk=run_id)
    conversation = run.conversation
    recorder = RunRecorder(conversation.pk, run.pk, user_id)
    workspace = await sync_to_async(workspace_for)(conversation.pk)
    hooks = await sync_to_async(settings_hooks)()
    hooks.add("SkillInvocation", recorder.audit_skill)
    hooks.add("PostToolUse", recorder.audit_tool)
    gate = PermissionGate(
        conversation_id=conversation.pk,
        run_id=run.pk,
        user_id=user_id,
        workspace=workspace,
        record=recorder.record,
        auto_answer=auto_answer,
    )
    recorder.gate = gate
    # It reads the database (personal uploads), which async code may not do directly.
    registry = await sync_to_async(store.skills_for_conversation)(conversation)

    async def stage(spec: SkillSpec) -> str:
        return str(await sync_to_async(workspace.stage_skill)(spec.name, spec.path, spec.digest))

    async def check(call: ToolCall, state: TurnState) -> Decision:
        # The rules alone, never an approval: for `!` commands and skill hooks.
        return decide(call, await sync_to_async(gate.context)(state))

    tools = default_tools()
    # A bare admin deny (e.g. "Bash") removes the tool from the request altogether.
    removed = await sync_to_async(gate.removed_tools)([*tools.names(), "Skill"])
    agent = Agent(
        client=client,
        tools=tools.without(removed),
        tool_context=ToolContext(
            workspace=workspace,
            sandbox=settings.SANDBOX,
            bash_timeout_default=settings.BASH_TIMEOUT_DEFAULT,
            bash_timeout_max=settings.BASH_TIMEOUT_MAX,
            output_limit=settings.BASH_OUTPUT_LIMIT,
        ),
        skills=registry,
        decide=gate.decide,
        emit=recorder,
        stage_skill=stage,
        config=await sync_to_async(store.agent_config)(conversation, model=run.model or None),
        hooks=hooks,
        check=check,
    )
    # Skills with `context: fork` run as subagents in child runs of this one.
    agent.fork = forks.make_fork(
        conversation_id=conversation.pk,
        parent_run_id=run.pk,
        user_id=user_id,
        client=client,
        tool_context=agent.tool_context,
        skills=registry,
        config=agent.config,
        recorder_factory=lambda child_id: RunRecorder(conversation.pk, child_id, user_id),
        stage_skill=stage,
        check=check,
    )
    agent.config = replace(agent.config, disable_skill_shell=settings.DISABLE_SKILL_SHELL)
    agent.register_skill_hooks(await sync_to_async(_stored_skill_hooks)(conversation.pk, registry))
    agent.state.disallowed_tools.update(removed)
    rows = await sync_to_async(store.history)(conversation)
    await recorder.record(
        "run.started",
        {"run_id": run.pk, "model": run.model, "label": run.model_label, "demo": run.is_demo},
    )
    status, error, kind = Run.DONE, "", ""
    outcome: RunOutcome | None = None
    try:
        outcome = await agent.run(rows, text)
        if outcome.status == "failed":
            status, error, kind = Run.FAILED, outcome.error, outcome.error_kind
    except asyncio.CancelledError:
        status, error, kind = Run.STOPPED, "Stopped by the user.", "stopped"
        await recorder.flush()
        await _finish(run.pk, recorder, status, error, kind)
        raise
    except Exception as exc:
        logger.exception("run %s failed", run.pk)
        status, error, kind = Run.FAILED, f"The run failed unexpectedly: {exc}", "internal"
        try:
            await agent._notice("error", error, code="internal")
        except Exception:
            logger.exception("could not record the failure of run %s", run.pk)
    await recorder.flush()
    await _finish(run.pk, recorder, status, error, kind)
    return outcome


async def _finish(run_id: int, recorder: RunRecorder, status: str, error: str, kind: str) -> None:
    finished = await Run.objects.filter(pk=run_id, status__in=Run.ACTIVE).aupdate(
        status=status, error=error, error_kind=kind, finished_at=timezone.now()
    )
    if not finished:
        # Another process already marked it interrupted (its heartbeat looked dead); keep that.
        logger.warning(
            "run %s had already been finished elsewhere; not marking it %s", run_id, status
        )
        return
    await recorder.record(
        "run.finished", {"run_id": run_id, "status": status, "error": error, "kind": kind}
    )
