"""One probe of a trigger run: the first request of a fresh conversation, and what it chose.

The request is `compose_request` itself, over a history of one user message, so it carries the
system prompt, tools and catalog a real conversation would get; the skill under test is the
version being measured (`WithVersion` puts it in place of the active one). The answer is read
through the delivery profile: a call of one of the profile's tools (`tool_names`) naming a
skill (`call_subject`) is a choice of that skill, whatever the profile calls its tool.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

from ..agent import AgentConfig, SkillProvider, TurnState
from ..context_window import estimate_input_tokens
from ..llm import ModelRequest
from ..pricing import cost_usd
from ..profiles import DeliveryProfile
from ..request import compose_request
from ..skillfile import SkillSpec
from ..tools.base import ToolRegistry
from ..transcript import StoredMessage


class WithVersion:
    """A skill provider in which `spec` stands in for any skill of the same name."""

    def __init__(self, provider: SkillProvider, spec: SkillSpec) -> None:
        self.provider = provider
        self.spec = spec

    def get(self, name: str) -> SkillSpec | None:
        return self.spec if name == self.spec.name else self.provider.get(name)

    def skills(self) -> list[SkillSpec]:
        others = [s for s in self.provider.skills() if s.name != self.spec.name]
        return sorted([*others, self.spec], key=lambda s: s.name)


def probe_request(
    query: str,
    *,
    tools: ToolRegistry,
    skills: SkillProvider,
    config: AgentConfig,
    removed: Iterable[str] = (),
) -> ModelRequest:
    """The request a fresh conversation sends for `query` as its first message."""
    history = [StoredMessage.text("user", query)]
    state = TurnState(disallowed_tools=set(removed))
    return compose_request(history, tools=tools, skills=skills, config=config, state=state)


def resolve_skill(subject: str, skills: Sequence[SkillSpec]) -> str:
    """The skill a call names, by its name or by the frontmatter name a profile may list it under;
    an unknown name is kept as the model wrote it."""
    for spec in skills:
        if spec.name == subject:
            return spec.name
    for spec in skills:
        own = spec.frontmatter.get("name")
        if isinstance(own, str) and own.strip() == subject:
            return spec.name
    return subject


def chosen_skill(
    content: Sequence[dict[str, Any]], profile: DeliveryProfile, skills: Sequence[SkillSpec]
) -> str:
    """The skill the answer's first skill call names ("" when it calls none)."""
    for block in content:
        if block.get("type") != "tool_use" or block.get("name") not in profile.tool_names:
            continue
        subject, _args = profile.call_subject(block)
        if subject.strip():
            return resolve_skill(subject.strip(), skills)
    return ""


def estimate_input(requests: Sequence[ModelRequest], repetitions: int) -> int:
    """Estimated prompt tokens of a run: each request's estimate, times the repetitions."""
    return sum(estimate_input_tokens(r) for r in requests) * repetitions


def estimate_cost(model: str, input_tokens: int) -> Decimal | None:
    """The input tokens at the model's input price (None: demo or unknown price)."""
    return cost_usd(model, {"input_tokens": max(0, math.ceil(input_tokens))})
