"""`system-prompt`, the skill-toolset design: six skill tools plus `skill_run`, and a request
processor that writes the skills into the system prompt before every model call.

- The system prompt gets, after the base prompt: "Available skills:" with one `- name:
  description` line per skill, the "Tooling and workspace guidance:" lines, then the body of
  every loaded skill and the text of every selected document.
- `skill_load(skill, args?)` loads a skill (rendered with its arguments, without Claude Code's
  base-directory line); `skill_select_docs` and `skill_select_tools` choose documents and tools;
  `skill_list`, `skill_list_docs` and `skill_list_tools` list what there is; `skill_run` runs a
  command in the staged skill, loaded or not, as the design does (see `skill_run.py`).
- That state lasts for the turn that loaded it, as the design's temporary state does; the
  `skill_state` setting "conversation" keeps it longer (see `skill_state.py`).
- A skill's `Tools:` list names tools of the agent that are that skill's own: they are left out
  of the request until a loaded skill selects them (on load, or with `skill_select_tools`), and
  then offered for the turn: the design's dynamic tool set.

"As the source design" (`AgentConfig.design`): the overview is the article's `_inject_overview`
text as printed (`DESIGN_OVERVIEW`), `skill_run`'s schema is `SkillRunInput`'s
(`skill_run.SKILL_RUN_DESIGN_TOOL`), the system prompt is one string without cache markers or
thinking, state lasts for the turn; `skill_load` and `skill_run` run without an approval unless
a rule asks, commands run with `bash -lc`, results
carry no `artifact_files` and each run folder keeps the run's record; a skill's model, effort,
allowed-tools, hooks and fork are not applied, and `/name` reaches the model as typed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from ..agent import AgentConfig
from ..skillfile import SkillSpec
from ..skilltool import SKILL_TOOL
from ..tools.base import ToolRegistry
from ..transcript import StoredMessage, tool_result_block
from .base import (
    DesignTraits,
    PromptContext,
    Rendering,
    SkillSession,
    ToolAnswer,
    not_to_model,
)
from .shared import error_answer, load_through_tool
from .skill_run import SKILL_RUN_DESIGN_TOOL, SKILL_RUN_TOOL, run_skill_command
from .skill_state import SkillState, declared_tools, skill_state, state_message

DOC_CHAR_LIMIT = 50_000
DOC_SUFFIXES = (".md", ".txt")
RENDERING = Rendering(base_dir_line=False, substitutions=True)


def _tool(
    name: str, description: str, properties: dict[str, Any], *required: str
) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return {"name": name, "description": description, "input_schema": schema}


_SKILL = {"skill": {"type": "string", "description": "The skill name."}}
SKILL_LIST_TOOL = _tool("skill_list", "List the available skills with their descriptions.", {})
SKILL_LOAD_TOOL = _tool(
    "skill_load",
    "Load a skill: its instructions are added to the system prompt from the next step on. "
    "Load a skill to read how its commands are run.",
    {**_SKILL, "args": {"type": "string", "description": "Optional arguments for the skill."}},
    "skill",
)
SKILL_LIST_DOCS_TOOL = _tool(
    "skill_list_docs",
    "List the documents of a skill (paths relative to its folder).",
    _SKILL,
    "skill",
)
SKILL_SELECT_DOCS_TOOL = _tool(
    "skill_select_docs",
    "Select documents of a loaded skill (paths relative to the skill folder, e.g. "
    '"references/tone.md"); their text is added to the system prompt.',
    {**_SKILL, "docs": {"type": "array", "items": {"type": "string"}}},
    "skill",
    "docs",
)
SKILL_LIST_TOOLS_TOOL = _tool(
    "skill_list_tools",
    "List the tools a skill declares and which of them are selected.",
    _SKILL,
    "skill",
)
SKILL_SELECT_TOOLS_TOOL = _tool(
    "skill_select_tools",
    'Select which of a loaded skill\'s declared tools are offered ("*" for all of them).',
    {
        **_SKILL,
        "tools": {
            "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}],
            "description": 'Tool names, or "*".',
        },
    },
    "skill",
    "tools",
)
TOOLSET = (
    SKILL_LIST_TOOL,
    SKILL_LOAD_TOOL,
    SKILL_LIST_DOCS_TOOL,
    SKILL_SELECT_DOCS_TOOL,
    SKILL_LIST_TOOLS_TOOL,
    SKILL_SELECT_TOOLS_TOOL,
    SKILL_RUN_TOOL,
)
_LASTS = {
    "turn": "until the user's next message",
    "conversation": "for the rest of the conversation",
}


def guidance(lifetime: str) -> str:
    """The design's "Tooling and workspace guidance" block, in our words."""
    return "\n".join(
        [
            "Tooling and workspace guidance:",
            "- Skills run inside an isolated workspace: skill_run stages the skill's folder "
            "read-only at $SKILLS_DIR/<name> and runs the command there (cwd is relative to "
            "that folder); its out/ and work/ lead to $OUTPUT_DIR and $WORK_DIR.",
            "- Prefer $SKILLS_DIR, $WORK_DIR, $OUTPUT_DIR, $RUN_DIR and $WORKSPACE_DIR over "
            "hard-coded paths, and name the files you need back in output_files.",
            "- If a skill is not loaded, call skill_load; loaded instructions, selected "
            f"documents and selected tools stay {_LASTS[lifetime]}.",
            "- When body and needed docs/tools are present, call skill_run or use tools directly.",
        ]
    )


def design_overview(skill_instructions: str) -> str:
    """Seed 004's `_inject_overview` instruction, as the article prints it (its "..." too).

    The article abbreviates two of the guidance lines with "..."; what the framework writes in
    their place is not shown, so the text is reproduced as printed (docs/profiles.md).
    """
    return (
        "\nAvailable skills:\n"
        f"{skill_instructions}\n"
        "Tooling and workspace guidance:\n"
        "- Skills run inside an isolated workspace...\n"
        "- Prefer $SKILLS_DIR, $WORK_DIR, $OUTPUT_DIR... over hard-coded paths\n"
        "- If a skill is not loaded, call skill_load\n"
        "- When body and needed docs/tools are present, call skill_run or use tools directly\n"
    )


def lifetime(config: AgentConfig) -> str:
    """How long loaded state lasts: the design's turn, or the `skill_state` setting."""
    return "turn" if config.design else config.skill_state


def skill_lines(skills: Sequence[SkillSpec]) -> str:
    lines = [f"- {s.name}: {' '.join(s.description.split())}" for s in skills if s.model_invocable]
    return "\n".join(sorted(lines)) or "(no skills available)"


class SystemPromptProfile:
    name: ClassVar[str] = "system-prompt"
    label: ClassVar[str] = "system-prompt (skill toolset)"
    tool_names: ClassVar[frozenset[str]] = frozenset(t["name"] for t in TOOLSET)
    # The design has no base prompt of its own: only what its request processor adds.
    design_prompt: ClassVar[str] = ""
    # The article shows no max_tokens, thinking, caching or slash commands, nor Claude Code's
    # per-skill model and tool scoping.
    design: ClassVar[DesignTraits] = DesignTraits(
        thinking=False, prompt_caching=False, skill_context=False, slash=False
    )

    def tools(self, base: ToolRegistry, config: AgentConfig) -> ToolRegistry:
        # The article does not define the agent's own tools ("write_to_file, read_file..."):
        # Skillscope's stay.
        return base

    def offered_tools(
        self, base: Sequence[dict[str, Any]], ctx: PromptContext
    ) -> list[dict[str, Any]]:
        """The agent's tools minus the skills' own, the toolset, then the turn's selected tools."""
        owned = {tool for spec in ctx.skills for tool in declared_tools(spec.body)}
        selected = skill_state(ctx.history, lifetime(ctx.config)).selected_tools()
        kept = [t for t in base if t["name"] not in owned]
        dynamic = [t for t in base if t["name"] in owned and t["name"] in selected]
        toolset = [*TOOLSET[:-1], SKILL_RUN_DESIGN_TOOL] if ctx.config.design else TOOLSET
        return [*kept, *toolset, *dynamic]

    def system(self, ctx: PromptContext) -> str:
        """The merged system prompt: base, overview and guidance, loaded bodies, documents."""
        base, config = ctx.base_system, ctx.config
        if not ctx.skills_allowed:
            return base
        state = skill_state(ctx.history, lifetime(config))
        if config.design:
            overview = design_overview(skill_lines(ctx.skills))
        else:
            lines = skill_lines(ctx.skills)
            overview = f"Available skills:\n{lines}\n{guidance(config.skill_state)}"
        parts = [base, overview] if base.strip() else [overview]
        for name, body in state.loaded.items():
            parts.append(f'<loaded_skill name="{name}">\n{body}\n</loaded_skill>')
            for doc, text in state.docs.get(name, {}).items():
                parts.append(
                    f'<skill_document skill="{name}" path="{doc}">\n{text}\n</skill_document>'
                )
        return "\n\n".join(parts)

    def invocation_form(self, config: AgentConfig) -> tuple[str, Rendering]:
        # The design asks no one before loading: `skill_load(NAME)` is allowed by default, under
        # the admin's `Skill(...)` rules; Skillscope's own form asks, as `Skill(NAME)`.
        return ("skill_load" if config.design else SKILL_TOOL), RENDERING

    def call_subject(self, block: dict[str, Any]) -> tuple[str, str]:
        tool_input = block.get("input") or {}
        args = tool_input.get("args") if block.get("name") == "skill_load" else ""
        return str(tool_input.get("skill") or ""), str(args or "")

    async def handle(self, session: SkillSession, block: dict[str, Any]) -> ToolAnswer:
        tool, tool_use_id = block["name"], block["id"]
        tool_input = block.get("input") or {}
        skill = str(tool_input.get("skill") or "")
        state = skill_state(session.history, lifetime(session.config))
        if tool == "skill_list":
            offered = [s for s in session.skills.skills() if s.model_invocable]
            return ToolAnswer(tool_result_block(tool_use_id, skill_lines(offered)))
        if tool == "skill_load":
            return await self._load(session, tool_use_id, skill, str(tool_input.get("args") or ""))
        spec = session.skills.get(skill)
        if spec is None or not spec.model_invocable:
            return error_answer(tool_use_id, f'unknown skill "{skill}".', skill=skill)
        if tool == "skill_list_docs":
            listing = "\n".join(_documents(spec)) or "(this skill has no documents)"
            return ToolAnswer(tool_result_block(tool_use_id, listing), skill=skill)
        if tool == "skill_list_tools":
            return ToolAnswer(
                tool_result_block(tool_use_id, _tools_listing(spec, state)), skill=skill
            )
        # skill_run stages and runs any offered skill, loaded or not, as seed 004's
        # `_run_async_impl` does: its Skill(NAME) and Bash rules decide (`run_skill_command`).
        if tool == "skill_run":
            return await run_skill_command(session, tool_use_id, skill, tool_input)
        if skill not in state.loaded:
            message = f'Load the skill "{skill}" with skill_load first.'
            return error_answer(tool_use_id, message, skill=skill)
        if tool == "skill_select_docs":
            return _select_docs(spec, tool_use_id, tool_input.get("docs"))
        return _select_tools(spec, tool_use_id, tool_input.get("tools"))

    async def _load(
        self, session: SkillSession, tool_use_id: str, name: str, args: str
    ) -> ToolAnswer:
        spec = session.skills.get(name)
        if spec is None:
            offered = ", ".join(s.name for s in session.skills.skills() if s.model_invocable)
            message = f'unknown skill "{name}". Available skills: {offered or "(none)"}'
            return error_answer(tool_use_id, message, skill=name)
        permission, rendering = self.invocation_form(session.config)
        outcome, answer = await load_through_tool(
            session, tool_use_id, name, args, permission=permission, rendering=rendering
        )
        if answer is not None:
            return answer
        status, hidden = outcome.messages[0], outcome.messages[1]
        tools = declared_tools(spec.body)
        state = state_message(name, "load", hidden.plain_text, tools=list(tools))
        rows = [(state, outcome.invocation), (not_to_model(status), outcome.invocation)]
        rows += [(m, outcome.invocation) for m in outcome.messages[2:]]
        text = f'Loaded the skill "{name}": its instructions are now in the system prompt.'
        if tools:
            text += f" Selected its tools: {', '.join(tools)}."
        return ToolAnswer(tool_result_block(tool_use_id, text), rows=tuple(rows), skill=name)

    def deliver_slash(
        self, session: SkillSession, messages: Sequence[StoredMessage]
    ) -> list[StoredMessage]:
        """A slash command keeps the body in the profile's state, not in a message."""
        if len(messages) < 2:
            return list(messages)
        status, hidden = messages[0], messages[1]
        skill = str(hidden.meta.get("skill", ""))
        spec = session.skills.get(skill)
        tools = list(declared_tools(spec.body)) if spec is not None else []
        return [status, state_message(skill, "load", hidden.plain_text, tools=tools), *messages[2:]]

    def fork_messages(self, skill: str, prompt: str) -> list[StoredMessage]:
        """The subagent starts with the skill loaded into its system prompt, and a task line."""
        task = f'Follow the instructions of the skill "{skill}", loaded in your system prompt.'
        first = StoredMessage.text("user", task, is_meta=True, meta={"skill": skill})
        loaded = state_message(skill, "load", prompt, tools=list(declared_tools(prompt)))
        return [first, loaded]


def _documents(spec: SkillSpec) -> list[str]:
    root = spec.path.resolve()
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and p.suffix.lower() in DOC_SUFFIXES and p.name.lower() != "skill.md"
    )


def _select_docs(spec: SkillSpec, tool_use_id: str, docs: Any) -> ToolAnswer:
    name = spec.name
    if not isinstance(docs, list) or not docs:
        message = "docs must be a non-empty list of paths in the skill folder."
        return error_answer(tool_use_id, message, skill=name)
    root = spec.path.resolve()
    selected: dict[str, str] = {}
    for doc in docs:
        path = (root / str(doc)).resolve()
        if not path.is_relative_to(root) or not path.is_file():
            listing = ", ".join(_documents(spec)) or "none"
            message = f'"{doc}" is not a document of the skill "{name}". Its documents: {listing}'
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


def _select_tools(spec: SkillSpec, tool_use_id: str, tools: Any) -> ToolAnswer:
    name = spec.name
    declared = declared_tools(spec.body)
    if not declared:
        return error_answer(tool_use_id, f'the skill "{name}" declares no tools.', skill=name)
    if tools == "*" or tools == ["*"]:
        chosen = list(declared)
    elif isinstance(tools, list) and all(isinstance(t, str) for t in tools):
        unknown = [t for t in tools if t not in declared]
        if unknown:
            message = (
                f'{", ".join(unknown)} is not a tool of the skill "{name}"; '
                f"its tools: {', '.join(declared)}."
            )
            return error_answer(tool_use_id, message, skill=name)
        chosen = list(dict.fromkeys(tools))
    else:
        return error_answer(tool_use_id, 'tools must be a list of tool names or "*".', skill=name)
    state = state_message(name, "tools", f"selected {len(chosen)} tool(s)", tools=chosen)
    text = f'Selected the tools of "{name}": {", ".join(chosen) or "none"}.'
    return ToolAnswer(tool_result_block(tool_use_id, text), rows=((state, None),), skill=name)


def _tools_listing(spec: SkillSpec, state: SkillState) -> str:
    declared = declared_tools(spec.body)
    if not declared:
        return f'The skill "{spec.name}" declares no tools.'
    chosen = set(state.tools.get(spec.name, ())) if spec.name in state.loaded else set()
    return "\n".join(f"- {t}{' (selected)' if t in chosen else ''}" for t in declared)
