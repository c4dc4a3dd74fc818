"""`meta-message`, Claude Code's design: the catalog is in the `Skill` tool's description; an
invoked skill adds a visible status message and a hidden user message with its instructions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from ..agent import AgentConfig
from ..skilltool import PERMISSION_DENIED, SKILL_TOOL, skill_call_input, skill_tool_schema
from ..tools.base import ToolRegistry
from ..transcript import StoredMessage, tool_result_block
from .base import (
    CLAUDE_CODE,
    DesignTraits,
    PromptContext,
    Rendering,
    SkillSession,
    ToolAnswer,
    skill_prompt_rows,
)

# The first sentence of Claude Code's own system prompt (the seed shows no more of it).
CLAUDE_CODE_PROMPT = "You are Claude Code, Anthropic's official CLI for Claude."


class MetaMessageProfile:
    name: ClassVar[str] = "meta-message"
    label: ClassVar[str] = "meta-message (Claude Code)"
    tool_names: ClassVar[frozenset[str]] = frozenset({SKILL_TOOL})
    design_prompt: ClassVar[str] = CLAUDE_CODE_PROMPT
    # Claude Code has all of Skillscope's additions (they are its own): model, allowed-tools,
    # thinking, caching, slash commands; "as the source design" changes only the base prompt.
    design: ClassVar[DesignTraits] = DesignTraits()

    def tools(self, base: ToolRegistry, config: AgentConfig) -> ToolRegistry:
        return base

    def offered_tools(
        self, base: Sequence[dict[str, Any]], ctx: PromptContext
    ) -> list[dict[str, Any]]:
        config = ctx.config
        schema = skill_tool_schema(
            ctx.skills, budget=config.catalog_budget, entry_cap=config.catalog_entry_cap
        )
        return [*base, schema]

    def system(self, ctx: PromptContext) -> str:
        return ctx.base_system

    def invocation_form(self, config: AgentConfig) -> tuple[str, Rendering]:
        return SKILL_TOOL, CLAUDE_CODE

    def call_subject(self, block: dict[str, Any]) -> tuple[str, str]:
        return skill_call_input(block.get("input") or {})

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
        return ToolAnswer(error, skill=name, denied=outcome.code == PERMISSION_DENIED)

    def deliver_slash(
        self, session: SkillSession, messages: Sequence[StoredMessage]
    ) -> list[StoredMessage]:
        return list(messages)

    def fork_messages(self, skill: str, prompt: str) -> list[StoredMessage]:
        return skill_prompt_rows(skill, prompt)
