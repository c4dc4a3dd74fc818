"""`system-prompt`, the toolset design: `skill_list`, `skill_load`, `skill_select_docs` and
`skill_run`; loaded instructions and selected documents are merged into the system prompt before
each request, rebuilt from hidden state rows (so the request stays a function of stored rows)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..agent import AgentConfig
from ..skillfile import SkillSpec
from ..transcript import HIDDEN_PREFIX, STATE_KIND, StoredMessage, tool_result_block
from .base import SkillSession, ToolAnswer, not_to_model
from .shared import catalog_lines, error_answer, load_through_tool
from .skill_run import SKILL_RUN_TOOL, run_skill_command

DOC_CHAR_LIMIT = 50_000

SKILL_LIST_TOOL: dict[str, Any] = {
    "name": "skill_list",
    "description": "List the available skills with their descriptions.",
    "input_schema": {"type": "object", "properties": {}},
}
SKILL_LOAD_TOOL: dict[str, Any] = {
    "name": "skill_load",
    "description": (
        "Load a skill: its instructions are added to the system prompt from the next step on. "
        "Load a skill before running any of its commands."
    ),
    "input_schema": {
        "type": "object",
        "properties": {"skill": {"type": "string"}},
        "required": ["skill"],
    },
}
SKILL_SELECT_DOCS_TOOL: dict[str, Any] = {
    "name": "skill_select_docs",
    "description": (
        "Select reference documents of a loaded skill (paths relative to the skill folder, e.g. "
        '"references/tone.md"); their text is added to the system prompt.'
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "skill": {"type": "string"},
            "docs": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["skill", "docs"],
    },
}
TOOLSET = (SKILL_LIST_TOOL, SKILL_LOAD_TOOL, SKILL_SELECT_DOCS_TOOL, SKILL_RUN_TOOL)


@dataclass(slots=True)
class SkillState:
    """Loaded skills and selected documents, rebuilt from the stored state rows."""

    loaded: dict[str, str] = field(default_factory=dict)
    docs: dict[str, dict[str, str]] = field(default_factory=dict)


def skill_state(history: Sequence[StoredMessage]) -> SkillState:
    """What the model has loaded: state rows of turns that are not excluded (failed, refused)."""
    state = SkillState()
    for row in history:
        if row.kind != STATE_KIND or row.excluded:
            continue
        name = row.meta.get("skill", "")
        if row.meta.get("op") == "load":
            state.loaded[name] = row.plain_text
        elif row.meta.get("op") == "docs":
            state.docs.setdefault(name, {}).update(row.meta.get("docs", {}))
    return state


def state_message(skill: str, op: str, text: str = "", **meta: Any) -> StoredMessage:
    """A hidden row holding loaded-skill state; never sent as a message, merged into the system."""
    return StoredMessage.text(
        "user",
        text or f"{op} {skill}",
        kind=STATE_KIND,
        is_meta=True,
        to_model=False,
        meta={"skill": skill, "op": op, **meta},
    )


def body_of(hidden: str) -> str:
    """The substituted body without the "Base directory for this skill" line."""
    if hidden.startswith(HIDDEN_PREFIX):
        _first, _sep, rest = hidden.partition("\n\n")
        return rest
    return hidden


class SystemPromptProfile:
    name: ClassVar[str] = "system-prompt"
    label: ClassVar[str] = "system-prompt (skill toolset)"
    tool_names: ClassVar[frozenset[str]] = frozenset(t["name"] for t in TOOLSET)

    def tools(self, skills: Sequence[SkillSpec], config: AgentConfig) -> list[dict[str, Any]]:
        return list(TOOLSET)

    def system(
        self,
        base: str,
        skills: Sequence[SkillSpec],
        history: Sequence[StoredMessage],
        *,
        skills_allowed: bool,
    ) -> str:
        """The merged system prompt: overview, guidance, loaded bodies, selected documents."""
        state = skill_state(history)
        parts = [
            base,
            "You have skills: folders of instructions, reference documents and scripts. Call "
            "skill_load before following or running a skill; select only the reference documents "
            "you need with skill_select_docs; run a skill's commands with skill_run.",
            "Available skills:\n" + catalog_lines(skills if skills_allowed else ()),
        ]
        for name, body in state.loaded.items():
            parts.append(f'<loaded_skill name="{name}">\n{body}\n</loaded_skill>')
            for doc, text in state.docs.get(name, {}).items():
                parts.append(
                    f'<skill_document skill="{name}" path="{doc}">\n{text}\n</skill_document>'
                )
        return "\n\n".join(parts)

    async def handle(self, session: SkillSession, block: dict[str, Any]) -> ToolAnswer:
        name = block["name"]
        tool_input = block.get("input") or {}
        skill = str(tool_input.get("skill") or "")
        if name == "skill_list":
            listing = catalog_lines(session.skills.skills())
            return ToolAnswer(tool_result_block(block["id"], listing))
        if name == "skill_load":
            return await self._load(session, block["id"], skill)
        if name == "skill_select_docs":
            return self._select_docs(session, block["id"], skill, tool_input.get("docs"))
        if skill not in skill_state(session.history).loaded:
            message = f'Load the skill "{skill}" with skill_load before running it.'
            return error_answer(block["id"], message, skill=skill)
        result = await run_skill_command(session, block["id"], skill, tool_input)
        return ToolAnswer(result, skill=skill)

    async def _load(self, session: SkillSession, tool_use_id: str, name: str) -> ToolAnswer:
        outcome, answer = await load_through_tool(session, tool_use_id, name)
        if outcome is None:
            assert answer is not None
            return answer
        status, hidden = outcome.messages[0], outcome.messages[1]
        state = state_message(name, "load", body_of(hidden.plain_text))
        rows = [(state, outcome.invocation), (not_to_model(status), outcome.invocation)]
        rows += [(m, outcome.invocation) for m in outcome.messages[2:]]
        text = f'Loaded the skill "{name}": its instructions are now in the system prompt.'
        return ToolAnswer(tool_result_block(tool_use_id, text), rows=tuple(rows), skill=name)

    def _select_docs(
        self, session: SkillSession, tool_use_id: str, name: str, docs: Any
    ) -> ToolAnswer:
        if name not in skill_state(session.history).loaded:
            return error_answer(tool_use_id, f'Load the skill "{name}" with skill_load first.')
        if not isinstance(docs, list) or not docs:
            message = "docs must be a non-empty list of paths in the skill folder."
            return error_answer(tool_use_id, message, skill=name)
        spec = session.skills.get(name)
        if spec is None:
            return error_answer(tool_use_id, f'Unknown skill "{name}".', skill=name)
        root = spec.path.resolve()
        selected: dict[str, str] = {}
        for doc in docs:
            path = (root / str(doc)).resolve()
            if not path.is_relative_to(root) or not path.is_file():
                files = sorted(
                    str(p.relative_to(root))
                    for p in root.rglob("*")
                    if p.is_file() and p.name != "SKILL.md"
                )
                message = f'"{doc}" is not a document of the skill "{name}". Its files: {", ".join(files)}'
                return error_answer(tool_use_id, message, skill=name)
            try:
                selected[str(doc)] = path.read_text(encoding="utf-8")[:DOC_CHAR_LIMIT]
            except UnicodeDecodeError:
                return error_answer(tool_use_id, f'"{doc}" is not a text document.', skill=name)
        state = state_message(name, "docs", f"selected {len(selected)} document(s)", docs=selected)
        text = (
            f'Selected {len(selected)} document(s) of "{name}": {", ".join(selected)}. '
            "Their text is now in the system prompt."
        )
        return ToolAnswer(tool_result_block(tool_use_id, text), rows=((state, None),), skill=name)

    def deliver_slash(self, messages: Sequence[StoredMessage]) -> list[StoredMessage]:
        """A slash command keeps the body in the profile's state, not in a message."""
        if len(messages) < 2:
            return list(messages)
        status, hidden = messages[0], messages[1]
        skill = str(hidden.meta.get("skill", ""))
        body = hidden.plain_text.partition("\n\n")[2] or hidden.plain_text
        return [status, state_message(skill, "load", body), *messages[2:]]
