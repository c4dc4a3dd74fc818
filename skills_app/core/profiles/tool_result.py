"""`tool-result`, the minimal teaching design: the catalog is in the system prompt under
"Skills available:"; `load_skill` returns `<skill name="...">...</skill>` as its tool result,
stored on a hidden row."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from ..agent import AgentConfig
from ..skillfile import SkillSpec
from ..transcript import StoredMessage, tool_result_block
from .base import SkillSession, ToolAnswer, not_to_model
from .shared import catalog_lines, load_through_tool

LOAD_SKILL_TOOL: dict[str, Any] = {
    "name": "load_skill",
    "description": (
        "Load a skill's full instructions by name. Call it before tackling a task that one of the "
        'skills listed under "Skills available:" in the system prompt covers.'
    ),
    "input_schema": {
        "type": "object",
        "properties": {"name": {"type": "string", "description": "The skill name."}},
        "required": ["name"],
    },
}


class ToolResultProfile:
    name: ClassVar[str] = "tool-result"
    label: ClassVar[str] = "tool-result (load_skill)"
    tool_names: ClassVar[frozenset[str]] = frozenset({"load_skill"})

    def tools(self, skills: Sequence[SkillSpec], config: AgentConfig) -> list[dict[str, Any]]:
        return [LOAD_SKILL_TOOL]

    def system(
        self,
        base: str,
        skills: Sequence[SkillSpec],
        history: Sequence[StoredMessage],
        *,
        skills_allowed: bool,
    ) -> str:
        if not skills_allowed:
            return base
        lines = catalog_lines(skills)
        return (
            f"{base}\n\nUse load_skill to load a skill's instructions.\nSkills available:\n{lines}"
        )

    async def handle(self, session: SkillSession, block: dict[str, Any]) -> ToolAnswer:
        tool_use_id = block["id"]
        name = str((block.get("input") or {}).get("name") or "")
        outcome, answer = await load_through_tool(session, tool_use_id, name)
        if outcome is None:
            assert answer is not None
            return answer
        status, hidden = outcome.messages[0], outcome.messages[1]
        wrapped = f'<skill name="{name}">\n{hidden.plain_text}\n</skill>'
        result = tool_result_block(tool_use_id, wrapped)
        # The result carrying the body is stored on its own hidden row; a chip stands for it.
        row = StoredMessage(
            role="user", kind="skill_prompt", content=(result,), is_meta=True, meta={"skill": name}
        )
        rows = [(row, outcome.invocation), (not_to_model(status), outcome.invocation)]
        rows += [(m, outcome.invocation) for m in outcome.messages[2:]]
        return ToolAnswer(None, rows=tuple(rows), skill=name)

    def deliver_slash(self, messages: Sequence[StoredMessage]) -> list[StoredMessage]:
        return list(messages)
