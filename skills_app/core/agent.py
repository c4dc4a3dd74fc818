"""What an agent is: configuration only. The loop that runs it lives in `runner.py`.

`Agent` bundles the model settings, the tools, the skills on offer, the delivery profile and the
hooks. `TurnState` is the execution context of the current turn (skills invoked in it and what
they changed); it ends with the user's next message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from .context_window import PreviousCall
from .hooks import Hooks
from .permissions import Rule
from .skillfile import SkillSpec
from .skillhooks import SkillHook
from .tools.base import ToolContext, ToolRegistry

SYSTEM_PROMPT = (
    "You are Skillscope's assistant. You help the user with their task and can load skills: "
    "folders of instructions, references and scripts. When a listed skill fits the request, "
    "load it with the skill tool you are given; once a skill is loaded, follow its instructions. Tools run inside this "
    "conversation's workspace: write files for the user under out/. Be concise."
)

# An audit row of a skill invocation, as the services identify it (the core only passes it on).
InvocationRef = int


class SkillProvider(Protocol):
    """The skills offered in one conversation."""

    def get(self, name: str) -> SkillSpec | None: ...

    def skills(self) -> list[SkillSpec]: ...


SKILL_STATE_LIFETIMES = ("turn", "conversation")


@dataclass(frozen=True, slots=True)
class AgentConfig:
    model: str
    max_tokens: int = 8192
    max_turns: int = 30
    system_prompt: str = SYSTEM_PROMPT
    session_id: str = ""
    catalog_budget: int = 15_000
    catalog_entry_cap: int = 1_536
    profile: str = "meta-message"
    # Replace `!` commands in skill bodies with a notice instead of running them.
    disable_skill_shell: bool = False
    # Adaptive thinking: True on, False off, None the model's default; effort "low".."max".
    thinking: bool | None = None
    effort: str | None = None
    # Cache breakpoints on the stable prefix and the conversation's last block.
    prompt_caching: bool = True
    # `system-prompt` profile: how long loaded skills, selected documents and selected tools
    # stay in the request: "turn" (the design's invocation-scoped state) or "conversation".
    skill_state: str = "turn"
    # `tool-result` profile: apply argument and ${CLAUDE_*} substitutions (and `!` commands) to
    # the body; off by default, as the design returns the body as written.
    tool_result_substitutions: bool = False
    # "As the source design": the profile reproduces its design's whole request (tools, system
    # prompt, max_tokens, thinking, slash behaviour) and leaves out Skillscope's additions the
    # design lacks (`DesignTraits` of each profile); False is "same base prompt".
    design: bool = False
    # The models the person's policy offers (a skill's `model:` outside them is refused and the
    # turn keeps its model); empty: no restriction (tests, the command line).
    offered_models: tuple[str, ...] = ()

    def offers(self, model: str) -> bool:
        """True when the person may use `model`."""
        return not self.offered_models or model in self.offered_models

    def __post_init__(self) -> None:
        if self.skill_state not in SKILL_STATE_LIFETIMES:
            known = ", ".join(SKILL_STATE_LIFETIMES)
            raise ValueError(f"skill_state {self.skill_state!r} is not one of {known}.")


@dataclass(frozen=True, slots=True)
class Agent:
    """The configuration of one run: settings, tools, skills, hooks. The Runner executes it."""

    config: AgentConfig
    tools: ToolRegistry
    skills: SkillProvider
    tool_context: ToolContext
    hooks: Hooks = field(default_factory=Hooks)
    # Tools an admin's bare deny rule removes (never offered, never run), e.g. "Bash".
    removed_tools: frozenset[str] = frozenset()
    # Skill hooks registered by earlier invocations in this conversation.
    skill_hooks: tuple[SkillHook, ...] = ()
    # The conversation's last model call, for estimating the next request's size exactly.
    previous_call: PreviousCall | None = None
    # Notices for the person when the run starts (an MCP server left out, say); never sent to
    # the model.
    notices: tuple[str, ...] = ()


@dataclass(slots=True)
class TurnState:
    """The execution context of the current turn; it ends with the user's next message."""

    active_skills: list[str] = field(default_factory=list)
    skill_rules: list[Rule] = field(default_factory=list)
    disallowed_tools: set[str] = field(default_factory=set)
    model_override: str | None = None
    # A skill's `effort`, for the rest of the turn that invoked it.
    effort_override: str | None = None
    # Extra environment for commands (SKILL_DIR of the skill invoked last).
    env: dict[str, str] = field(default_factory=dict)
    invocations: dict[str, InvocationRef] = field(default_factory=dict)
    current_invocation: InvocationRef | None = None


@dataclass(frozen=True, slots=True)
class RunOutcome:
    status: str  # done | failed | blocked
    stop_reason: str | None = None
    error: str = ""
    error_kind: str = ""
    model_calls: int = 0


@dataclass(frozen=True, slots=True)
class ForkResult:
    """What a subagent hands back: its final text, or why it failed."""

    ok: bool
    text: str = ""
    error: str = ""
    run: int | None = None


__all__ = [
    "SKILL_STATE_LIFETIMES",
    "SYSTEM_PROMPT",
    "Agent",
    "AgentConfig",
    "ForkResult",
    "InvocationRef",
    "RunOutcome",
    "SkillProvider",
    "TurnState",
]
