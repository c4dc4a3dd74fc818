"""Forked skills (`context: fork`): the skill runs as a subagent in a child run.

The subagent starts from a fresh message list whose first (hidden) user message is the rendered
skill; its rows are stored in the same conversation, linked to the child run and marked
`to_model=False`, so the parent model never sees them; the parent receives only the final text.
"""

from __future__ import annotations

import asyncio
import logging

from django.utils import timezone

from skills_app.core.agent import ForkResult
from skills_app.core.events import SubagentFinished, SubagentStarted
from skills_app.core.llm import ModelClient
from skills_app.core.logcontext import log_context
from skills_app.core.skillfile import SkillSpec
from skills_app.core.transcript import StoredMessage
from skills_app.models import Run
from skills_app.runs.factory import RunSetup, build_runner, spending_for, subagent_model
from skills_app.runs.ports import ForkFn
from skills_app.runs.recorder import RunRecorder
from skills_app.runs.spending import Spending

logger = logging.getLogger(__name__)


def make_forker(
    setup: RunSetup, *, parent_run_id: int, user_id: int, client: ModelClient
) -> ForkFn:
    """The `fork` port of a parent run: each call runs one subagent to its end."""

    async def fork(spec: SkillSpec, prompt: str) -> ForkResult:
        child = await Run.objects.acreate(
            conversation_id=setup.conversation_id,
            parent_id=parent_run_id,
            model=subagent_model(spec, setup.config),
            model_label=client.label,
            is_demo=client.is_demo,
        )
        with log_context(run_id=child.pk):
            return await _subagent(spec, prompt, child)

    async def _subagent(spec: SkillSpec, prompt: str, child: Run) -> ForkResult:
        recorder = RunRecorder(setup.conversation_id, child.pk, user_id)
        spending = spending_for(setup, client, "fork")
        try:
            return await _run_subagent(spec, prompt, child, recorder, spending)
        finally:
            if spending is not None:
                await asyncio.shield(spending.close())

    async def _run_subagent(
        spec: SkillSpec,
        prompt: str,
        child: Run,
        recorder: RunRecorder,
        spending: Spending | None,
    ) -> ForkResult:
        runner = await build_runner(
            setup,
            run_id=child.pk,
            user_id=user_id,
            client=client,
            recorder=recorder,
            subagent=spec,
            spending=spending,
        )
        await recorder.record(
            SubagentStarted(run_id=child.pk, parent_run_id=parent_run_id, skill=spec.name)
        )
        # The profile decides how the subagent receives the skill (a message, or its state).
        first = runner.profile.fork_messages(spec.name, prompt)
        for row in first:
            await runner.ports.record_message(row)
        status, error = Run.DONE, ""
        try:
            outcome = await runner.run(first, None)
            if outcome.status == "failed":
                status, error = Run.FAILED, outcome.error
        except Exception as exc:  # the parent gets an error result, never a crash
            logger.exception("subagent run %s failed", child.pk)
            status, error = Run.FAILED, f"The subagent failed: {exc}"
        finally:
            await recorder.flush()
        final = final_text(runner.history)
        await Run.objects.filter(pk=child.pk).aupdate(
            status=status, error=error, finished_at=timezone.now(), model_calls=runner.model_calls
        )
        await recorder.record(
            SubagentFinished(
                run_id=child.pk, parent_run_id=parent_run_id, skill=spec.name, status=status
            )
        )
        if status != Run.DONE:
            return ForkResult(
                ok=False, text=final, error=error or "The subagent failed.", run=child.pk
            )
        return ForkResult(
            ok=True, text=final or "(the subagent gave no final answer)", run=child.pk
        )

    return fork


def final_text(history: list[StoredMessage]) -> str:
    """The subagent's last answer: the only part its parent sees."""
    for message in reversed(history):
        if message.role == "assistant" and message.sent_to_model and message.plain_text.strip():
            return message.plain_text.strip()
    return ""
