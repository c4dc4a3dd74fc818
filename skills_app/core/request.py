"""The next model request, as a pure function of the stored rows and the turn's context."""

from __future__ import annotations

from collections.abc import Sequence

from .agent import AgentConfig, SkillProvider, TurnState
from .llm import ModelRequest
from .profiles import get_profile
from .skilltool import SKILL_TOOL
from .tools.base import ToolRegistry
from .transcript import StoredMessage, to_api_messages


def compose_request(
    history: Sequence[StoredMessage],
    *,
    tools: ToolRegistry,
    skills: SkillProvider,
    config: AgentConfig,
    state: TurnState | None = None,
) -> ModelRequest:
    """System prompt, tools (with the profile's skill tools) and the stored messages."""
    state = state or TurnState()
    profile = get_profile(config.profile)
    schemas = [s for s in tools.schemas() if s["name"] not in state.disallowed_tools]
    # A bare `Skill` deny (or a skill's disallowed-tools) removes skills in every profile.
    skills_allowed = SKILL_TOOL not in state.disallowed_tools
    invocable = [s for s in skills.skills() if s.model_invocable] if skills_allowed else []
    if skills_allowed:
        schemas = profile.offered_tools(schemas, invocable, history, config)
    system = profile.system(
        config.system_prompt, invocable, history, skills_allowed=skills_allowed, config=config
    )
    return ModelRequest(
        model=state.model_override or config.model,
        system=system,
        tools=schemas,
        messages=to_api_messages(history),
        max_tokens=config.max_tokens,
        thinking=config.thinking,
        effort=state.effort_override or config.effort,
        cache=config.prompt_caching,
    )
