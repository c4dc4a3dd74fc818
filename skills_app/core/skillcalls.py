"""A call of a profile's skill tools (Skill, load_skill, skill_*), as the runner makes it.

Seed 000's hook contract holds for skill calls as for any tool: PreToolUse runs first, with the
skill the call names and its arguments; a block answers with the error and runs nothing; the
profile answers the call; PostToolUse runs unless the hook blocked it or the rules or the user
refused it, with the result the model gets, also when that result carries a skill's body on a
hidden row (tool-result's `load_skill`): hooks are trusted server-side code, like the rest of
the run, and a skill's own hook commands run sandboxed, their output hidden from people
(`hidden.py`). Every call ends with a `ToolFinished` event for the tool card, which shows a
placeholder instead of a body.
"""

from __future__ import annotations

from typing import Any

from .events import ToolFinished
from .hooks import Hooks
from .ports import RunPorts
from .profiles import SkillSession, ToolAnswer
from .tools.base import ToolResult
from .transcript import tool_result_block

# What the tool card and the hooks get instead of a result that carries a skill body.
HIDDEN_RESULT = "(skill instructions, hidden)"


class SkillCalls:
    """Answers skill calls through the session's profile, between the hooks."""

    def __init__(self, session: SkillSession, hooks: Hooks, ports: RunPorts) -> None:
        self.session = session
        self.hooks = hooks
        self.ports = ports

    async def call(self, block: dict[str, Any], payload: dict[str, Any]) -> ToolAnswer:
        """Run one skill call; `payload` is the runner's hook payload for the block."""
        profile = self.session.profile
        skill, args = profile.call_subject(block)
        payload = {**payload, "skill": skill, "args": args}
        blocked = await self.hooks.first_block("PreToolUse", payload)
        if blocked:
            text = f"Blocked by a hook: {blocked.reason}"
            answer = ToolAnswer(tool_result_block(block["id"], text, is_error=True), skill=skill)
            await self.finished(block, answer)
            return answer
        answer = await profile.handle(self.session, block)
        await self.finished(block, answer)
        if not answer.denied:
            result = answer.result or _hidden_result(answer, block["id"])
            content = str(result["content"]) if result is not None else HIDDEN_RESULT
            is_error = answer.failed or bool(result and result.get("is_error"))
            post = {**payload, "result": ToolResult(content, is_error=is_error), "decision": None}
            await self.hooks.run("PostToolUse", post)
        return answer

    async def finished(self, block: dict[str, Any], answer: ToolAnswer) -> None:
        tool_input = block.get("input") or {}
        skill = answer.skill or str(tool_input.get("skill") or tool_input.get("name") or "")
        result = answer.result
        shown = answer.shown if answer.shown is not None else HIDDEN_RESULT
        await self.ports.emit(
            ToolFinished(
                tool_use_id=block["id"],
                name=block["name"],
                is_error=answer.failed or bool(result and result.get("is_error")),
                content=str(result["content"]) if result is not None else shown,
                skill=skill,
                artifacts=answer.artifacts,
            )
        )


def _hidden_result(answer: ToolAnswer, tool_use_id: str) -> dict[str, Any] | None:
    """The tool_result block a hidden row of the answer carries for this call, if any."""
    for row, _invocation in answer.rows:
        for block in row.content:
            if block.get("type") == "tool_result" and block.get("tool_use_id") == tool_use_id:
                return block
    return None
