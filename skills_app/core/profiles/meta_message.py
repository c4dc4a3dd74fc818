"""`meta-message`, Claude Code's design: the catalog is in the `Skill` tool's description; an
invoked skill adds a visible status message and a hidden user message with its instructions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from ..agent import AgentConfig
from ..skillfile import SkillSpec
from ..skilltool import SKILL_TOOL, skill_call_input, skill_tool_schema
from ..transcript import StoredMessage, tool_result_block
from .base import SkillSession, ToolAnswer


class MetaMessageProfile:
    name: ClassVar[str] = "meta-message"
    label: ClassVar[str] = "meta-message (Claude Code)"
    tool_names: ClassVar[frozenset[str]] = frozenset({SKILL_TOOL})

    def tools(self, skills: Sequence[SkillSpec], config: AgentConfig) -> list[dict[str, Any]]:
        schema = skill_tool_schema(
            skills, budget=config.catalog_budget, entry_cap=config.catalog_entry_cap
        )
        return [schema]

    def system(
        self,
        base: str,
        skills: Sequence[SkillSpec],
        history: Sequence[StoredMessage],
        *,
        skills_allowed: bool,
    ) -> str:
        return base

    async def handle(self, session: SkillSession, block: dict[str, Any]) -> ToolAnswer:
        name, args = skill_call_input(block.get("input") or {})
        tool_use_id = block["id"]
        outcome = await session.invoke(name, args, caller="model", tool_use_id=tool_use_id)
        if outcome.ok and session.forks(name):
            forked = await session.run_fork(name, outcome)
            text = forked.text if forked.ok else f"Error: {forked.error}"
            return ToolAnswer(
                tool_result_block(tool_use_id, text, is_error=not forked.ok), skill=name
            )
        if outcome.ok:
            # The body follows the result in the same user turn, in its own hidden row.
            rows = tuple((m, outcome.invocation) for m in outcome.messages)
            launching = tool_result_block(tool_use_id, f"Launching skill: {name}")
            return ToolAnswer(launching, rows=rows, skill=name)
        error = tool_result_block(tool_use_id, f"Error: {outcome.error}", is_error=True)
        return ToolAnswer(error, skill=name)

    def deliver_slash(self, messages: Sequence[StoredMessage]) -> list[StoredMessage]:
        return list(messages)
