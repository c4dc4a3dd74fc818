"""The Skill meta-tool: its schema, the validation both entrances share, and slash-command parsing."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .catalog import build_catalog
from .skillfile import SkillSpec

SKILL_TOOL = "Skill"
MAX_STACKED = 6

# Error codes, one per way an invocation can fail before anything is delivered.
EMPTY_NAME = "empty_name"
UNKNOWN_SKILL = "unknown_skill"
CANNOT_LOAD = "cannot_load"
MODEL_INVOCATION_DISABLED = "model_invocation_disabled"
USER_INVOCATION_DISABLED = "user_invocation_disabled"
NOT_A_SKILL = "not_a_skill"
PERMISSION_DENIED = "permission_denied"


class SkillInvocationError(Exception):
    """An invocation that cannot go ahead; `code` is one of the error codes above."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def skill_tool_schema(
    skills: Sequence[SkillSpec], *, budget: int, entry_cap: int
) -> dict[str, Any]:
    """The `Skill` tool definition; its description carries the catalog (Layer 1)."""
    return {
        "name": SKILL_TOOL,
        "description": build_catalog(skills, budget=budget, entry_cap=entry_cap),
        "input_schema": {
            "type": "object",
            "properties": {
                "skill": {
                    "type": "string",
                    "description": 'The skill name, e.g. "release-notes" or "plugin:name".',
                },
                "args": {"type": "string", "description": "Optional arguments for the skill."},
            },
            "required": ["skill"],
        },
    }


def skill_call_input(raw: Mapping[str, Any]) -> tuple[str, str]:
    """Name and args from a Skill tool_use input (the legacy key `command` is accepted)."""
    name = raw.get("skill")
    if name is None:
        name = raw.get("command")
    args = raw.get("args") or ""
    name_text = str(name).strip() if name is not None else ""
    # Models sometimes include the slash of the user's command.
    if name_text.startswith("/"):
        name_text = name_text[1:]
    return name_text, str(args)


def validate_invocation(
    name: str,
    *,
    caller: str,
    lookup: Callable[[str], SkillSpec | None],
    reserved: Sequence[str] = (),
) -> SkillSpec:
    """Check that `name` can be invoked by `caller` ("user" or "model"); raise SkillInvocationError."""
    if not name:
        raise SkillInvocationError(
            EMPTY_NAME, 'No skill name given. Call Skill with {"skill": NAME} using a listed name.'
        )
    if name in reserved:
        raise SkillInvocationError(
            NOT_A_SKILL, f'"{name}" is a tool, not a skill. Call the {name} tool directly.'
        )
    spec = lookup(name)
    if spec is None:
        raise SkillInvocationError(
            UNKNOWN_SKILL, f'Unknown skill "{name}". Use one of the names in <available_skills>.'
        )
    if not spec.skill_file.is_file():
        raise SkillInvocationError(
            CANNOT_LOAD, f'The skill "{name}" cannot be loaded: {spec.skill_file} is gone.'
        )
    if caller == "model" and spec.disable_model_invocation:
        raise SkillInvocationError(
            MODEL_INVOCATION_DISABLED,
            f'The skill "{name}" can only be invoked by the user (disable-model-invocation).',
        )
    if caller == "user" and not spec.user_invocable:
        raise SkillInvocationError(
            USER_INVOCATION_DISABLED,
            f'The skill "{name}" cannot be run as a slash command (user-invocable: false).',
        )
    return spec


_SLASH_WORD = re.compile(r"/([^\s/]+)")


@dataclass(frozen=True, slots=True)
class SlashCommand:
    names: tuple[str, ...]
    args: str


def parse_slash_command(text: str, is_skill: Callable[[str], bool]) -> SlashCommand | None:
    """`/name args` or stacked `/a /b args`; None when the first word is not a known skill."""
    rest = text.strip()
    names: list[str] = []
    while rest.startswith("/") and len(names) < MAX_STACKED:
        m = _SLASH_WORD.match(rest)
        if not m or not is_skill(m.group(1)):
            break
        names.append(m.group(1))
        rest = rest[m.end() :].lstrip()
    if not names:
        return None
    return SlashCommand(names=tuple(names), args=rest)
