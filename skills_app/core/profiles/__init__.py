"""Delivery profiles: three designs for giving skills to the model, on one engine.

The registry maps each profile's name to its class; nothing else in the code branches on a
profile's name. See `base.py` for the protocol every profile implements.
"""

from __future__ import annotations

from ..agent import AgentConfig
from ..transcript import STATE_KIND
from .base import (
    CLAUDE_CODE,
    DeliveryProfile,
    DesignTraits,
    PromptContext,
    Rendering,
    SkillOutcome,
    SkillSession,
    ToolAnswer,
)
from .meta_message import MetaMessageProfile
from .system_prompt import SystemPromptProfile
from .tool_result import ToolResultProfile

PROFILES: dict[str, type[DeliveryProfile]] = {
    cls.name: cls for cls in (MetaMessageProfile, ToolResultProfile, SystemPromptProfile)
}
DEFAULT_PROFILE = MetaMessageProfile.name


def get_profile(name: str) -> DeliveryProfile:
    """The profile called `name`; ValueError naming the known ones otherwise."""
    try:
        return PROFILES[name]()
    except KeyError:
        known = ", ".join(PROFILES)
        raise ValueError(f"Unknown delivery profile {name!r}: use one of {known}.") from None


def design_prompt(name: str, workdir: str) -> str:
    """The base prompt of the design profile `name` reproduces, for this workspace root."""
    return get_profile(name).design_prompt.replace("{workdir}", workdir)


def design_traits(config: AgentConfig) -> DesignTraits | None:
    """The traits of the profile's source design when the run reproduces it, else None."""
    return get_profile(config.profile).design if config.design else None


def skill_context(config: AgentConfig) -> bool:
    """Whether an invoked skill changes the turn's execution context (model, tools, hooks...)."""
    traits = design_traits(config)
    return traits is None or traits.skill_context


def slash_invokes(config: AgentConfig) -> bool:
    """Whether `/name` invokes the skill on the server (else the model gets the text as typed)."""
    traits = design_traits(config)
    return traits is None or traits.slash


def profile_choices() -> list[tuple[str, str]]:
    """(name, label) pairs, for forms and model fields."""
    return [(name, cls.label) for name, cls in PROFILES.items()]


__all__ = [
    "CLAUDE_CODE",
    "DEFAULT_PROFILE",
    "PROFILES",
    "STATE_KIND",
    "DeliveryProfile",
    "DesignTraits",
    "PromptContext",
    "Rendering",
    "SkillOutcome",
    "SkillSession",
    "ToolAnswer",
    "design_prompt",
    "design_traits",
    "get_profile",
    "profile_choices",
    "skill_context",
    "slash_invokes",
]
