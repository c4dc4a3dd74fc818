"""Pieces the `tool-result` and `system-prompt` profiles share: loading a skill through a tool
call (and running it as a subagent when it forks), and error answers."""

from __future__ import annotations

from dataclasses import replace

from ..skilltool import PERMISSION_DENIED
from ..transcript import tool_result_block
from .base import Rendering, SkillOutcome, SkillSession, ToolAnswer, not_to_model


def error_answer(
    tool_use_id: str, message: str, *, skill: str = "", denied: bool = False
) -> ToolAnswer:
    return ToolAnswer(
        tool_result_block(tool_use_id, f"Error: {message}", is_error=True),
        skill=skill,
        denied=denied,
    )


async def load_through_tool(
    session: SkillSession,
    tool_use_id: str,
    name: str,
    args: str,
    *,
    permission: str,
    rendering: Rendering,
) -> tuple[SkillOutcome, ToolAnswer | None]:
    """Invoke a skill for a loader tool: the outcome, and the answer when nothing is left to do
    (a failure, or a forked skill whose subagent already ran)."""
    outcome = await session.invoke(
        name,
        args,
        caller="model",
        tool_use_id=tool_use_id,
        permission=permission,
        rendering=rendering,
    )
    if not outcome.ok:
        denied = outcome.code == PERMISSION_DENIED
        return outcome, error_answer(tool_use_id, outcome.error, skill=name, denied=denied)
    if session.forks(name):
        return outcome, await forked_answer(session, tool_use_id, name, outcome)
    return outcome, None


async def forked_answer(
    session: SkillSession, tool_use_id: str, name: str, outcome: SkillOutcome
) -> ToolAnswer:
    """A `context: fork` skill runs as a subagent; its final text is the tool result."""
    chip = not_to_model(outcome.messages[0])
    forked = await session.run_fork(name, replace(outcome, messages=(chip, *outcome.messages[1:])))
    text = forked.text if forked.ok else f"Error: {forked.error}"
    return ToolAnswer(tool_result_block(tool_use_id, text, is_error=not forked.ok), skill=name)
