"""Claude Code's `Skill` meta-tool as seed 003 describes it (`003_84bbeeafde46ec7a.txt`).

Sections used: "Frontmatter" (`formatSkill`, `when_to_use`, the "(plugin:NAME)" suffix, `mode`),
"Skills Object Design" (the tool object `Pd`: `inputSchema {command}`, `outputSchema {success,
commandName}`, the prompt `fN2`, the metadata message, the `command_permissions` message),
"Case Study: Execution Lifecycle" (`loadPluginSkills`, `getSkillsForSkillTool`, `validateInput`
with its five error codes, `call`, the Phase 4 request).

The stored article lost its XML tags in extraction: the metadata message reads "The "pdf" skill
is loading / pdf / report.pdf" and the prompt "listed in  below". The tags are restored from
DESIGN.md (`<command-message>`, `<command-name>`, `<command-args>`, `<available_skills>`),
which names them; the oracle marks where it does so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

# "Skills Object Design": `Pd`'s schemas.
INPUT_SCHEMA = {"command": "string"}
OUTPUT_SCHEMA = {"success": "boolean", "commandName": "string"}
# The Phase 4 request's system prompt, as far as the article prints it.
SYSTEM_PREFIX = "You are Claude Code, Anthropic's official CLI"
_FRONTMATTER = re.compile(r"\A---\n(.*?)\n---\n?(.*)\Z", re.DOTALL)


@dataclass(frozen=True)
class Command:
    """A loaded skill as `loadPluginSkills` builds it (Phase 1)."""

    name: str
    description: str
    when_to_use: str | None
    has_user_specified_description: bool
    disable_model_invocation: bool
    is_mode_command: bool
    prompt_content: str


def load_skill(skill_file: Path, *, plugin: str | None = None) -> Command:
    """Phase 1 `loadPluginSkills` for one SKILL.md (a folder skill when `plugin` is None)."""
    text = skill_file.read_text(encoding="utf-8")
    match = _FRONTMATTER.match(text)
    frontmatter: dict[str, Any] = (yaml.safe_load(match.group(1)) or {}) if match else {}
    markdown = match.group(2) if match else text
    folder = skill_file.parent.name
    description = frontmatter.get("description")
    # `hasUserSpecifiedDescription` implies a skill without one still has a description; the
    # article does not say which: today's Claude Code takes the markdown's first paragraph.
    own = str(description) if description is not None else first_paragraph(markdown)
    return Command(
        name=f"{plugin}:{folder}" if plugin else folder,
        # `${frontmatter.description} (plugin:${plugin.name})`
        description=f"{own} (plugin:{plugin})" if plugin else own,
        when_to_use=frontmatter.get("when_to_use"),  # "Note: underscores!"
        has_user_specified_description=description is not None,
        disable_model_invocation=frontmatter.get("disable-model-invocation") is True,
        is_mode_command=frontmatter.get("mode") is True,
        prompt_content=markdown,
    )


def first_paragraph(markdown: str) -> str:
    """The first paragraph of the body, its lines joined by spaces."""
    paragraph = markdown.strip().split("\n\n", 1)[0]
    return " ".join(paragraph.split())


def skills_for_skill_tool(commands: list[Command]) -> list[Command]:
    """Phase 2 `getSkillsForSkillTool`: model-invocable, with a description or when_to_use."""
    return [
        c
        for c in commands
        if not c.disable_model_invocation and (c.has_user_specified_description or c.when_to_use)
    ]


def format_skill(skill: Command) -> str:
    """Phase 2 `formatSkill`: `"name": description - when_to_use`."""
    description = (
        f"{skill.description} - {skill.when_to_use}" if skill.when_to_use else skill.description
    )
    return f'"{skill.name}": {description}'


def status_message(name: str) -> str:
    """Phase 3 `call`: `The "${skill.userFacingName()}" skill is loading`."""
    return f'The "{name}" skill is loading'


def metadata(name: str, args: str = "") -> str:
    """ "Skills Object Design": `[statusMessage, skillName, args].filter(Boolean).join('\\n')`,
    each in its tag (the tags restored, see the module docstring)."""
    parts = [
        f"<command-message>{status_message(name)}</command-message>",
        f"<command-name>{name}</command-name>",
        f"<command-args>{args}</command-args>" if args else None,
    ]
    return "\n".join(p for p in parts if p)


def tool_output(name: str) -> dict[str, Any]:
    """Phase 3 `call` yields `data: { success: true, commandName: skillName }`."""
    return {"success": True, "commandName": name}


def validate_input(command: str, commands: dict[str, Command]) -> int | None:
    """Phase 3 step 1 `validateInput`: None when valid, else error codes 1, 2 and 4 (3, "can't
    load", and 5, "not prompt-based", cannot happen to a skill folder)."""
    skill_name = command.strip().removeprefix("/")
    if not skill_name:
        return 1
    skill = commands.get(skill_name)
    if skill is None:
        return 2
    if skill.disable_model_invocation:
        return 4
    return None
