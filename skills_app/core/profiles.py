"""Delivery profiles: three designs for giving skills to the model, on one engine.

- `meta-message` (Claude Code): catalog in the `Skill` tool; the body is a hidden user message.
- `tool-result` (the teaching design): catalog in the system prompt; `load_skill` returns the body
  as its tool_result, stored as hidden content.
- `system-prompt` (the toolset design): `skill_list`, `skill_load`, `skill_select_docs`, `skill_run`;
  loaded bodies and selected documents are merged into the system prompt before each request.

In every profile the injected text is stored in hidden rows, so the request stays a pure function of
the stored rows and the UI shows a status chip instead of the text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .skillfile import SkillSpec
from .transcript import StoredMessage

META_MESSAGE = "meta-message"
TOOL_RESULT = "tool-result"
SYSTEM_PROMPT_PROFILE = "system-prompt"
PROFILES = (META_MESSAGE, TOOL_RESULT, SYSTEM_PROMPT_PROFILE)

STATE_KIND = "skill_state"
DOC_CHAR_LIMIT = 50_000

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
SKILL_RUN_TOOL: dict[str, Any] = {
    "name": "skill_run",
    "description": (
        "Run a shell command for a loaded skill in the conversation workspace. The skill folder is "
        "staged read-only at $SKILLS_DIR/<name>; write outputs to $OUTPUT_DIR. Returns stdout, "
        "stderr, exit_code, timed_out, duration and the output files matching output_files."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "skill": {"type": "string"},
            "command": {"type": "string"},
            "cwd": {
                "type": "string",
                "description": "Working directory, relative to the workspace.",
            },
            "env": {"type": "object", "additionalProperties": {"type": "string"}},
            "output_files": {"type": "array", "items": {"type": "string"}},
            "timeout": {"type": "number", "description": "Seconds."},
        },
        "required": ["skill", "command"],
    },
}
TOOLSET = (SKILL_LIST_TOOL, SKILL_LOAD_TOOL, SKILL_SELECT_DOCS_TOOL, SKILL_RUN_TOOL)
TOOLSET_NAMES = frozenset(t["name"] for t in TOOLSET)


def catalog_lines(skills: Sequence[SkillSpec]) -> str:
    """`  - name: description [tags]` lines for the model-invocable skills."""
    lines = []
    for spec in sorted(skills, key=lambda s: s.name):
        if not spec.model_invocable:
            continue
        description = " ".join(spec.description.split())
        tags = _tags(spec)
        lines.append(f"  - {spec.name}: {description}" + (f" [{', '.join(tags)}]" if tags else ""))
    return "\n".join(lines)


def _tags(spec: SkillSpec) -> list[str]:
    raw = spec.frontmatter.get("tags") or spec.metadata.get("tags") or []
    if isinstance(raw, str):
        raw = [t.strip() for t in raw.replace(",", " ").split()]
    return [str(t) for t in raw if str(t).strip()]


def tool_result_system(base: str, skills: Sequence[SkillSpec]) -> str:
    lines = catalog_lines(skills)
    return f"{base}\n\nUse load_skill to load a skill's instructions.\nSkills available:\n{lines}"


@dataclass(slots=True)
class SkillState:
    """Loaded skills and selected documents, rebuilt from the stored state rows."""

    loaded: dict[str, str] = field(default_factory=dict)
    docs: dict[str, dict[str, str]] = field(default_factory=dict)


def skill_state(history: Sequence[StoredMessage]) -> SkillState:
    state = SkillState()
    for row in history:
        if row.kind != STATE_KIND:
            continue
        name = row.meta.get("skill", "")
        if row.meta.get("op") == "load":
            state.loaded[name] = row.plain_text
        elif row.meta.get("op") == "docs":
            state.docs.setdefault(name, {}).update(row.meta.get("docs", {}))
    return state


def toolset_system(base: str, skills: Sequence[SkillSpec], history: Sequence[StoredMessage]) -> str:
    """The merged system prompt of the toolset design: overview, guidance, loaded bodies, docs."""
    state = skill_state(history)
    parts = [
        base,
        "You have skills: folders of instructions, reference documents and scripts. Call "
        "skill_load before following or running a skill; select only the reference documents you "
        "need with skill_select_docs; run a skill's commands with skill_run.",
        "Available skills:\n" + catalog_lines(skills),
    ]
    for name, body in state.loaded.items():
        parts.append(f'<loaded_skill name="{name}">\n{body}\n</loaded_skill>')
        for doc, text in state.docs.get(name, {}).items():
            parts.append(f'<skill_document skill="{name}" path="{doc}">\n{text}\n</skill_document>')
    return "\n\n".join(parts)


def state_message(skill: str, op: str, text: str = "", **meta: Any) -> StoredMessage:
    return StoredMessage.text(
        "user",
        text or f"{op} {skill}",
        kind=STATE_KIND,
        is_meta=True,
        to_model=False,
        meta={"skill": skill, "op": op, **meta},
    )
