"""`tool-result`, the teaching design of learn-claude-code s05, reproduced byte for byte.

- The catalog is in the system prompt: the base prompt, the line telling the model to use
  load_skill, then "Skills available:" and one `  - name: description [tags]` line per skill
  ("No description" when the frontmatter has none, "(no skills available)" when there are none).
- `load_skill(name)` answers with `<skill name="NAME">\n{body}\n</skill>` as its tool result: the
  body as written (no base-directory line, no substitutions unless the admin turns them on),
  stored on a hidden row while a chip stands for it in the transcript.
- Names are the frontmatter `name` when it is a valid skill name, else the folder name.
- The design's errors are plain text results ("Error: ..."), without the API's is_error flag.
- No approval by default: loading is checked as `load_skill(NAME)`, whose default is allow;
  an admin's `Skill(...)` deny or ask rule still applies.
- A user's `/name args` reaches the model as what the user typed, followed by the same
  `<skill>` block (no tool call is made up for it).

"As the source design" (`AgentConfig.design`) the request is the design's own: its tools
(`s05_tools`: bash, read_file, write_file, edit_file, then load_skill), its system prompt as one
string, max_tokens 8000, no thinking, no cache markers; the catalog and the bodies come from the
design's loader (`s05_loader`: sorted paths, the naive frontmatter reader, the body not
stripped); a skill's model, effort, allowed-tools, hooks and fork are not applied; `/name`
reaches the model as typed, and the model loads the skill with load_skill (seed 001's figure 2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, ClassVar

from ..agent import AgentConfig
from ..lint import name_format_problem
from ..skillfile import SkillSpec
from ..skilltool import PERMISSION_DENIED
from ..tools.base import ToolRegistry
from ..transcript import StoredMessage, tool_result_block
from . import s05_loader
from .base import (
    DesignTraits,
    PromptContext,
    Rendering,
    SkillOutcome,
    SkillSession,
    ToolAnswer,
    not_to_model,
    skill_prompt_rows,
)
from .s05_tools import DESIGN_TOOLS
from .shared import load_through_tool

LOAD_TOOL = "load_skill"
LOAD_LINE = "Use load_skill to access specialized knowledge before tackling unfamiliar topics."
LOAD_SKILL_TOOL: dict[str, Any] = {
    "name": LOAD_TOOL,
    "description": "Load specialized knowledge by name.",
    "input_schema": {
        "type": "object",
        "properties": {"name": {"type": "string", "description": "Skill name to load"}},
        "required": ["name"],
    },
}
# The design's body as written, or with the substitutions an admin turned on.
AS_WRITTEN = Rendering(base_dir_line=False, substitutions=False)
SUBSTITUTED = Rendering(base_dir_line=False, substitutions=True)


def design_names(skills: Sequence[SkillSpec]) -> dict[str, SkillSpec]:
    """The skills under the names the design gives them, in the design's order (folder paths).

    The frontmatter `name` when it is a valid skill name, else the folder (command) name; a name
    another skill already took falls back to the command name, so every skill stays reachable.
    """
    named: dict[str, SkillSpec] = {}
    for spec in sorted(skills, key=lambda s: (s.path.name, s.name)):
        own = spec.frontmatter.get("name")
        name = spec.name
        if isinstance(own, str) and own.strip() and name_format_problem(own) is None:
            name = own.strip()
        if name in named:
            name = spec.name
        named.setdefault(name, spec)
    return named


def design_name(spec: SkillSpec, skills: Sequence[SkillSpec]) -> str:
    """The name the design shows for one skill."""
    return next((n for n, s in design_names(skills).items() if s.name == spec.name), spec.name)


def descriptions(skills: Sequence[SkillSpec]) -> str:
    """The design's skill list: `  - name: description [tags]`, one line per skill."""
    lines = []
    for name, spec in design_names(skills).items():
        raw = spec.frontmatter.get("description")
        description = " ".join(str(raw).split()) if spec.has_description else "No description"
        line = f"  - {name}: {description}"
        tags = _tags(spec)
        if tags:
            line += f" [{tags}]"
        lines.append(line)
    return "\n".join(lines) or "(no skills available)"


def _tags(spec: SkillSpec) -> str:
    raw = spec.frontmatter.get("tags") or spec.metadata.get("tags") or ""
    if isinstance(raw, list):
        return ", ".join(str(t).strip() for t in raw if str(t).strip())
    return str(raw).strip()


wrap = s05_loader.wrap


class ToolResultProfile:
    name: ClassVar[str] = "tool-result"
    label: ClassVar[str] = "tool-result (load_skill)"
    tool_names: ClassVar[frozenset[str]] = frozenset({LOAD_TOOL})
    design_prompt: ClassVar[str] = "You are a coding agent at {workdir}."
    # agent_loop: `client.messages.create(model, system=SYSTEM, messages, tools, max_tokens=8000)`.
    design: ClassVar[DesignTraits] = DesignTraits(
        max_tokens=8000, thinking=False, prompt_caching=False, skill_context=False, slash=False
    )

    def tools(self, base: ToolRegistry, config: AgentConfig) -> ToolRegistry:
        return ToolRegistry(DESIGN_TOOLS) if config.design else base

    def offered_tools(
        self, base: Sequence[dict[str, Any]], ctx: PromptContext
    ) -> list[dict[str, Any]]:
        return [*base, LOAD_SKILL_TOOL]

    def system(self, ctx: PromptContext) -> str:
        if not ctx.skills_allowed:
            return ctx.base_system
        if ctx.config.design:
            listing = s05_loader.get_descriptions(s05_loader.load_skills(ctx.skills))
        else:
            listing = descriptions(ctx.skills)
        return f"{ctx.base_system}\n{LOAD_LINE}\n\nSkills available:\n{listing}"

    def invocation_form(self, config: AgentConfig) -> tuple[str, Rendering]:
        return LOAD_TOOL, SUBSTITUTED if config.tool_result_substitutions else AS_WRITTEN

    def call_subject(self, block: dict[str, Any]) -> tuple[str, str]:
        return str((block.get("input") or {}).get("name") or ""), ""

    async def handle(self, session: SkillSession, block: dict[str, Any]) -> ToolAnswer:
        if session.config.design:
            return await self._design_load(session, block)
        tool_use_id = block["id"]
        name = str((block.get("input") or {}).get("name") or "")
        listed = [s for s in session.skills.skills() if s.model_invocable]
        named = design_names(listed)
        spec = named.get(name)
        if spec is None:
            # A skill left out of the listing (a deny rule blocks it) still goes through the
            # rules when called by its name, so the refusal names the rule. A listed skill is
            # reachable only under the name the design gives it.
            found = session.skills.get(name)
            unlisted = found is not None and all(s.name != found.name for s in listed)
            spec = found if unlisted and found is not None and found.model_invocable else None
        if spec is None:
            available = ", ".join(named)
            return _plain(
                tool_use_id, f"Error: Unknown skill '{name}'. Available: {available}", name
            )
        permission, rendering = self.invocation_form(session.config)
        outcome, answer = await load_through_tool(
            session, tool_use_id, spec.name, "", permission=permission, rendering=rendering
        )
        if answer is not None and not outcome.ok:
            return replace(
                _plain(tool_use_id, f"Error: {outcome.error}", name), denied=answer.denied
            )
        if answer is not None:
            return answer
        return _delivered(tool_use_id, name, spec, outcome)

    async def _design_load(self, session: SkillSession, block: dict[str, Any]) -> ToolAnswer:
        """The design's `load_skill`: its names, its error text, its body; still audited, checked
        by the rules (`load_skill(NAME)`, allowed unless a `Skill(...)` rule says otherwise)."""
        tool_use_id = block["id"]
        name = str((block.get("input") or {}).get("name") or "")
        listed = [s for s in session.skills.skills() if s.model_invocable]
        named = s05_loader.load_skills(listed)
        found = named.get(name)
        if found is None:
            return _plain(tool_use_id, s05_loader.unknown(name, named), name)
        spec = found.spec
        rendering = Rendering(base_dir_line=False, substitutions=False, text=found.body)
        outcome = await session.invoke(
            spec.name,
            "",
            caller="model",
            tool_use_id=tool_use_id,
            permission=LOAD_TOOL,
            rendering=rendering,
            context=False,
        )
        if not outcome.ok:
            answer = _plain(tool_use_id, f"Error: {outcome.error}", name)
            return replace(answer, denied=outcome.code == PERMISSION_DENIED)
        return _delivered(tool_use_id, name, spec, outcome)

    def deliver_slash(
        self, session: SkillSession, messages: Sequence[StoredMessage]
    ) -> list[StoredMessage]:
        """What the user typed for the skill (their chip), then the same `<skill>` block."""
        if len(messages) < 2:
            return list(messages)
        status, hidden = messages[0], messages[1]
        skill = str(status.meta.get("skill", ""))
        spec = session.skills.get(skill)
        name = design_name(spec, session.skills.skills()) if spec is not None else skill
        typed = f"/{skill} {status.meta.get('args', '')}".rstrip()
        chip = replace(status, content=({"type": "text", "text": typed},))
        block = replace(hidden, content=({"type": "text", "text": wrap(name, hidden.plain_text)},))
        return [chip, block, *messages[2:]]

    def fork_messages(self, skill: str, prompt: str) -> list[StoredMessage]:
        return skill_prompt_rows(skill, prompt)


def _delivered(tool_use_id: str, name: str, spec: SkillSpec, outcome: SkillOutcome) -> ToolAnswer:
    """The result carrying the body, stored on its own hidden row; a chip stands for it."""
    status, hidden = outcome.messages[0], outcome.messages[1]
    result = tool_result_block(tool_use_id, wrap(name, hidden.plain_text))
    row = StoredMessage(
        role="user",
        kind="skill_prompt",
        content=(result,),
        is_meta=True,
        meta={"skill": spec.name},
    )
    rows = [(row, outcome.invocation), (not_to_model(status), outcome.invocation)]
    rows += [(m, outcome.invocation) for m in outcome.messages[2:]]
    return ToolAnswer(None, rows=tuple(rows), skill=spec.name)


def _plain(tool_use_id: str, text: str, skill: str) -> ToolAnswer:
    # The design returns errors as ordinary text; the UI still marks the call as failed.
    return ToolAnswer(tool_result_block(tool_use_id, text), skill=skill, failed=True)
