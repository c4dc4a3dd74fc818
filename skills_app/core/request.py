"""The next model request, as a pure function of the stored rows and the turn's context."""

from __future__ import annotations

from collections.abc import Sequence

from .agent import AgentConfig, SkillProvider, TurnState
from .llm import ModelRequest
from .profiles import PromptContext, design_traits, get_profile
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
    """System prompt, tools (with the profile's skill tools) and the stored messages.

    "As the source design" the profile's `DesignTraits` set what the design sends: its
    max_tokens, no thinking or effort, no cache markers (the system prompt as one string).
    """
    state = state or TurnState()
    profile = get_profile(config.profile)
    removed = state.disallowed_tools
    # A design's own tool is removed with the Skillscope tool its calls are decided as
    # (a bare `Bash` deny removes tool-result's `bash`).
    schemas = [
        {"name": t.name, "description": t.description, "input_schema": t.input_schema}
        for t in profile.tools(tools, config)
        if t.name not in removed and _decided_as(t) not in removed
    ]
    # A bare `Skill` deny (or a skill's disallowed-tools) removes skills in every profile.
    skills_allowed = SKILL_TOOL not in removed
    invocable = [s for s in skills.skills() if s.model_invocable] if skills_allowed else []
    ctx = PromptContext(invocable, history, skills_allowed, config)
    if skills_allowed:
        schemas = profile.offered_tools(schemas, ctx)
    system = profile.system(ctx)
    traits = design_traits(config)
    max_tokens, thinking, effort = config.max_tokens, config.thinking, config.effort
    effort = state.effort_override or effort
    cache = config.prompt_caching
    if traits is not None:
        max_tokens = traits.max_tokens or max_tokens
        if not traits.thinking:
            thinking, effort = False, None
        cache = cache and traits.prompt_caching
    return ModelRequest(
        model=state.model_override or config.model,
        system=system,
        tools=schemas,
        messages=to_api_messages(history),
        max_tokens=max_tokens,
        thinking=thinking,
        effort=effort,
        cache=cache,
    )


def _decided_as(tool: object) -> str | None:
    """The Skillscope tool a design's tool is decided as (`permission_call`), if it has one."""
    decided = getattr(tool, "decided_as", None)
    return decided if isinstance(decided, str) else None
