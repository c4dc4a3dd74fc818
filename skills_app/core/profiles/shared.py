"""Pieces the `tool-result` and `system-prompt` profiles share: the catalog as text lines and the
start of loading a skill through a tool call."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..skillfile import SkillSpec
from ..transcript import tool_result_block
from .base import SkillOutcome, SkillSession, ToolAnswer, not_to_model


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


def error_answer(tool_use_id: str, message: str, *, skill: str = "") -> ToolAnswer:
    return ToolAnswer(
        tool_result_block(tool_use_id, f"Error: {message}", is_error=True), skill=skill
    )


def available_names(session: SkillSession) -> str:
    return ", ".join(s.name for s in session.skills.skills() if s.model_invocable) or "(none)"


async def load_through_tool(
    session: SkillSession, tool_use_id: str, name: str
) -> tuple[SkillOutcome | None, ToolAnswer | None]:
    """The shared start of `load_skill` and `skill_load`: an outcome to deliver, or the answer."""
    if session.skills.get(name) is None:
        message = f'unknown skill "{name}". Available skills: {available_names(session)}'
        return None, error_answer(tool_use_id, message, skill=name)
    outcome = await session.invoke(name, "", caller="model", tool_use_id=tool_use_id)
    if not outcome.ok:
        return None, error_answer(tool_use_id, outcome.error, skill=name)
    if session.forks(name):
        return None, await forked_answer(session, tool_use_id, name, outcome)
    return outcome, None


async def forked_answer(
    session: SkillSession, tool_use_id: str, name: str, outcome: SkillOutcome
) -> ToolAnswer:
    """A `context: fork` skill runs as a subagent; its final text is the tool result."""
    chip = not_to_model(outcome.messages[0])
    forked = await session.run_fork(name, replace(outcome, messages=(chip, *outcome.messages[1:])))
    text = forked.text if forked.ok else f"Error: {forked.error}"
    return ToolAnswer(tool_result_block(tool_use_id, text, is_error=not forked.ok), skill=name)
