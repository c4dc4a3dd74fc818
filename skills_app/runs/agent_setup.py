"""A conversation's agent: its settings, the skills it offers, and its next request from its rows.

What a run reads once to set itself up (`factory.load_setup`), and what the audit and the model
picker show of it; `build_request` rebuilds the request exactly as the runner would compose it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from django.conf import settings

from skills_app.core.agent import SYSTEM_PROMPT, AgentConfig, SkillProvider
from skills_app.core.llm import ModelRequest
from skills_app.core.profiles import design_prompt
from skills_app.core.request import compose_request
from skills_app.core.skillfile import SkillSpec
from skills_app.core.tools import default_tools
from skills_app.models import Conversation
from skills_app.permissions.blocked import offered
from skills_app.registry.skills import skills_for_user
from skills_app.runs.store import history


class FilteredSkills:
    """Only the named skills of a provider (a conversation's `skill_filter`)."""

    def __init__(self, provider: SkillProvider, names: Sequence[str]) -> None:
        self.provider = provider
        self.names = frozenset(names)

    def get(self, name: str) -> SkillSpec | None:
        return self.provider.get(name) if name in self.names else None

    def skills(self) -> list[SkillSpec]:
        return [s for s in self.provider.skills() if s.name in self.names]


def skills_for_conversation(conversation: Conversation) -> SkillProvider:
    """The skills offered in a conversation: its owner's, narrowed by its skill filter.

    Skills a deny rule blocks are left out of the listing (the model's catalog), not out of
    lookups: naming one still gets the rule's refusal.
    """
    provider: SkillProvider = offered(skills_for_user(conversation.owner_id), conversation.owner_id)
    if conversation.skill_filter:
        return FilteredSkills(provider, conversation.skill_filter)
    return provider


def base_prompt(conversation: Conversation) -> str:
    """The conversation's base system prompt: Skillscope's, or its profile's design prompt."""
    if conversation.base_prompt != Conversation.DESIGN_PROMPT:
        return SYSTEM_PROMPT
    # The workspace root as `Workspace.for_conversation` resolves it (without creating it).
    workdir = (Path(settings.WORKSPACE_ROOT) / str(conversation.pk)).resolve()
    return design_prompt(conversation.profile, str(workdir))


def agent_config(conversation: Conversation, *, model: str | None = None) -> AgentConfig:
    """The agent's settings for a conversation: its picks, else the configured defaults.

    "As the source design" (`base_prompt`) is more than the prompt: the profile then sends its
    design's whole request (`AgentConfig.design`, docs/profiles.md).
    """
    thinking = conversation.thinking
    return AgentConfig(
        design=conversation.base_prompt == Conversation.DESIGN_PROMPT,
        system_prompt=base_prompt(conversation),
        skill_state=settings.SKILL_STATE_LIFETIME,
        tool_result_substitutions=settings.TOOL_RESULT_SUBSTITUTIONS,
        model=model or conversation.model or settings.ANTHROPIC_MODEL,
        max_tokens=settings.ANTHROPIC_MAX_TOKENS,
        max_turns=settings.AGENT_MAX_TURNS,
        session_id=str(conversation.session_id),
        catalog_budget=settings.SKILL_CATALOG_BUDGET,
        catalog_entry_cap=settings.SKILL_CATALOG_ENTRY_CAP,
        profile=conversation.profile,
        thinking=settings.ANTHROPIC_THINKING if thinking is None else thinking,
        effort=conversation.effort or settings.ANTHROPIC_EFFORT or None,
        prompt_caching=settings.ANTHROPIC_PROMPT_CACHING,
    )


def build_request(conversation: Conversation, *, model: str | None = None) -> ModelRequest:
    """The Anthropic request for this conversation, rebuilt from its stored rows."""
    return compose_request(
        history(conversation),
        tools=default_tools(),
        skills=skills_for_conversation(conversation),
        config=agent_config(conversation, model=model),
    )
