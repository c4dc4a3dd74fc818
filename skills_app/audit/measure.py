"""Measures of a request: its size per part, the catalog against eager loading, shared prefixes.

Sizes are characters and characters / 4 as a rough token estimate; the usage the API reported for
a call (its exact tokens) is in `ModelCall`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from django.conf import settings

from skills_app.core.agent import SkillProvider
from skills_app.core.catalog import build_catalog
from skills_app.core.skilltool import SKILL_TOOL
from skills_app.core.transcript import HIDDEN_PREFIX

CHARS_PER_TOKEN = 4
# The load_skill delivery profile puts the body in a tool_result wrapped in this tag.
SKILL_RESULT_PREFIX = "<skill "
# The other profiles put the catalog, and (toolset) the loaded bodies, in the system prompt.
_SYSTEM_CATALOG = re.compile(
    r"(?:Skills available|Available skills):\n.*?(?=\n\n<loaded_skill |\n\n<skill_document |\Z)",
    re.S,
)
_SYSTEM_BODIES = re.compile(
    r"<loaded_skill name=.*?</loaded_skill>|<skill_document skill=.*?</skill_document>", re.S
)
SIZE_PARTS = (
    ("system_prompt", "System prompt"),
    ("tool_schemas", "Tool schemas (without the catalog)"),
    ("catalog", "Skill catalog (Skill tool description)"),
    ("skill_bodies", "Injected skill bodies"),
    ("tool_results", "Tool results"),
    ("conversation", "Conversation"),
)


def catalog_of(tools: Sequence[dict[str, Any]]) -> str:
    for tool in tools:
        if tool.get("name") == SKILL_TOOL:
            return str(tool.get("description", ""))
    return ""


class Measurable(Protocol):
    """A request to measure: a ModelRequest, or a RequestView of the audit."""

    @property
    def system(self) -> str: ...

    @property
    def tools(self) -> list[dict[str, Any]]: ...

    @property
    def messages(self) -> list[dict[str, Any]]: ...


# -- measuring ----------------------------------------------------------------------------------


def estimate_tokens(chars: int) -> int:
    """A rough token estimate: characters / 4."""
    return round(chars / CHARS_PER_TOKEN)


def size_breakdown(request: Measurable) -> dict[str, dict[str, int]]:
    """Characters and estimated tokens per part of a request, plus `total`."""
    chars = dict.fromkeys((key for key, _label in SIZE_PARTS), 0)
    system = request.system or ""
    catalog = catalog_of(request.tools)
    in_system = sum(len(m.group(0)) for m in _SYSTEM_CATALOG.finditer(system))
    bodies_in_system = sum(len(m.group(0)) for m in _SYSTEM_BODIES.finditer(system))
    chars["system_prompt"] = len(system) - in_system - bodies_in_system
    chars["catalog"] = len(catalog) + in_system
    chars["skill_bodies"] = bodies_in_system
    schemas = [
        {**t, "description": ""} if t.get("name") == SKILL_TOOL else t for t in request.tools
    ]
    chars["tool_schemas"] = _json_len(schemas) if request.tools else 0
    for message in request.messages:
        content = message.get("content")
        if isinstance(content, str):
            chars["conversation"] += len(content)
            continue
        for block in content or []:
            part, size = _classify(block)
            chars[part] += size
    result = {key: {"chars": n, "tokens": estimate_tokens(n)} for key, n in chars.items()}
    total = sum(chars.values())
    result["total"] = {"chars": total, "tokens": estimate_tokens(total)}
    return result


def _classify(block: dict[str, Any]) -> tuple[str, int]:
    kind = block.get("type")
    if kind == "text":
        text = str(block.get("text", ""))
        return ("skill_bodies" if text.startswith(HIDDEN_PREFIX) else "conversation", len(text))
    if kind == "tool_result":
        text = _result_text(block.get("content"))
        return ("skill_bodies" if text.startswith(SKILL_RESULT_PREFIX) else "tool_results"), len(
            text
        )
    if kind == "tool_use":
        return "conversation", len(str(block.get("name", ""))) + _json_len(block.get("input", {}))
    return "conversation", _json_len(block)


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text", "")) if b.get("type") == "text" else json.dumps(b) for b in content
        )
    return ""


def _json_len(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False))


@dataclass(frozen=True, slots=True)
class LayerSaving:
    """The catalog the model gets vs every skill body placed in the system prompt up front."""

    skills: int
    catalog_chars: int
    all_bodies_chars: int

    @property
    def catalog_tokens(self) -> int:
        return estimate_tokens(self.catalog_chars)

    @property
    def all_bodies_tokens(self) -> int:
        return estimate_tokens(self.all_bodies_chars)


def layer_saving(provider: SkillProvider) -> LayerSaving:
    """Compare Layer 1 (the catalog) with eager loading, for the skills a provider offers."""
    skills = [s for s in provider.skills() if s.model_invocable]
    catalog = build_catalog(
        skills,
        budget=settings.SKILL_CATALOG_BUDGET,
        entry_cap=settings.SKILL_CATALOG_ENTRY_CAP,
    )
    bodies = sum(len(f'<skill name="{s.name}">\n{s.body}\n</skill>\n') for s in skills)
    return LayerSaving(skills=len(skills), catalog_chars=len(catalog), all_bodies_chars=bodies)


def common_prefix(a: Sequence[dict[str, Any]], b: Sequence[dict[str, Any]]) -> int:
    """How many leading messages two requests share exactly (for showing only what is new)."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
