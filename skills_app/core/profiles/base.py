"""The DeliveryProfile protocol: how one design gives skills to the model.

A profile decides which skill tools the model gets (and the catalog in them or in the system
prompt), what the system prompt says, how its tool calls are answered and how a user's `/name` is
delivered. Every profile reaches the shared skill machinery (validation, the `Skill(NAME)` rule,
rendering, the audit) through a `SkillSession`, so the injected text is always stored hidden.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from ..agent import AgentConfig, ForkResult, InvocationRef, SkillProvider, TurnState
from ..permissions import Decision, ToolCall
from ..skillfile import SkillSpec
from ..tools.base import ToolContext, ToolRegistry
from ..transcript import StoredMessage

# A row stored after the turn's tool results, with the invocation it belongs to.
StoredRow = tuple[StoredMessage, InvocationRef | None]


@dataclass(frozen=True, slots=True)
class Rendering:
    """How an invocation renders a skill's body for the profile that delivers it."""

    # Claude Code's first line, "Base directory for this skill: DIR", then a blank line.
    base_dir_line: bool = True
    # Arguments, ${CLAUDE_*}, {baseDir}, the ARGUMENTS line and `!` dynamic context; without
    # them the body is delivered as written (and its `!` commands never run).
    substitutions: bool = True
    # The exact text to deliver, as the profile's design reads it from SKILL.md (no
    # substitutions, and delivered in full again when the same text was loaded before).
    text: str | None = None


CLAUDE_CODE = Rendering()


@dataclass(frozen=True, slots=True)
class PromptContext:
    """What a profile builds the next request's system prompt and skill tools from."""

    # The skills the model may invoke (none when a `Skill` deny removes them all).
    skills: Sequence[SkillSpec]
    # The conversation's stored rows (a profile may carry state in them: loaded skills).
    history: Sequence[StoredMessage]
    # False when the turn's rules remove the skill tools altogether.
    skills_allowed: bool
    config: AgentConfig

    @property
    def base_system(self) -> str:
        """The configured system prompt the profile's text is added to."""
        return self.config.system_prompt


@dataclass(frozen=True, slots=True)
class DesignTraits:
    """What a profile's source design has; "as the source design" applies exactly these.

    Under "same base prompt" every profile runs with Skillscope's settings and additions; under
    "as the source design" (`AgentConfig.design`) a trait that is False leaves Skillscope's
    version out of the request or the run.
    """

    # The design's max_tokens (None: the configured value).
    max_tokens: int | None = None
    # Thinking and an effort level: False sends no thinking (nor effort) at all.
    thinking: bool = True
    # Prompt caching: False sends the system prompt as one string and no cache_control.
    prompt_caching: bool = True
    # A skill's execution-context change: `model`, `effort`, `allowed-tools`,
    # `disallowed-tools`, `hooks`, `context: fork` and $SKILL_DIR for commands.
    skill_context: bool = True
    # `/name` invokes the skill on the server; False sends what the user typed to the model,
    # which loads the skill with its own tool call.
    slash: bool = True


@dataclass(frozen=True, slots=True)
class SkillOutcome:
    """An invocation's result: the rows to deliver, or why it failed."""

    ok: bool
    messages: tuple[StoredMessage, ...] = ()
    invocation: InvocationRef | None = None
    error: str = ""
    code: str = ""


@dataclass(frozen=True, slots=True)
class ToolAnswer:
    """How a profile answers one of its tool calls.

    `result` is the tool_result block for the turn's visible result row (None when a hidden row
    in `rows` carries it); `shown` is what the tool card shows instead of the result, if anything.
    """

    result: dict[str, Any] | None
    rows: tuple[StoredRow, ...] = ()
    skill: str = ""
    shown: str | None = None
    # A call the rules or the user refused: no PostToolUse hook runs for it.
    denied: bool = False
    # Failed although the wire result carries no is_error (a design that sends plain text).
    failed: bool = False
    # Workspace files under out/ the call produced, offered to the user as downloads.
    artifacts: tuple[str, ...] = ()


class SkillSession(Protocol):
    """What a profile may use of the run that calls it."""

    @property
    def profile(self) -> DeliveryProfile: ...

    @property
    def skills(self) -> SkillProvider: ...

    @property
    def history(self) -> Sequence[StoredMessage]: ...

    @property
    def state(self) -> TurnState: ...

    def tool_context(self) -> ToolContext:
        """The tools' context with the turn's environment (the invoked skill's directory)."""
        ...

    @property
    def config(self) -> AgentConfig: ...

    async def invoke(
        self,
        name: str,
        args: str,
        *,
        caller: str,
        tool_use_id: str | None,
        permission: str = "Skill",
        rendering: Rendering = CLAUDE_CODE,
        context: bool = True,
    ) -> SkillOutcome:
        """Validate, check the rules as `permission(NAME)`, render and audit one invocation;
        `context=False` leaves the skill's execution-context change out (see DesignTraits)."""
        ...

    async def stage_skill(self, name: str) -> str:
        """Stage the skill's folder in the workspace (again when it changed); its directory there."""
        ...

    def forks(self, name: str) -> bool:
        """True when the skill runs as a subagent (`context: fork`)."""
        ...

    async def run_fork(self, name: str, outcome: SkillOutcome) -> ForkResult:
        """Run an invoked `context: fork` skill as a subagent."""
        ...

    async def decide(self, call: ToolCall, *, allow_by_default: bool = False) -> Decision:
        """Decide a call under the turn's rules, asking the user when they say ask.

        `allow_by_default`: the design runs this call without asking, so it is decided as if a
        bare allow rule for its tool were in force: deny and ask rules still win.
        """
        ...


class DeliveryProfile(Protocol):
    """One design for delivering skills; see `profiles/__init__.py` for the registry."""

    name: ClassVar[str]
    label: ClassVar[str]
    # The tool names this profile answers (and only these).
    tool_names: ClassVar[frozenset[str]]
    # The base system prompt of the design this profile reproduces, for "as the source design"
    # comparisons; "{workdir}" stands for the conversation's workspace root.
    design_prompt: ClassVar[str]
    # What the source design has (applied when `AgentConfig.design` is on).
    design: ClassVar[DesignTraits]

    def tools(self, base: ToolRegistry, config: AgentConfig) -> ToolRegistry:
        """The agent's own tools under this profile (a design may bring its own set)."""
        ...

    def offered_tools(
        self, base: Sequence[dict[str, Any]], ctx: PromptContext
    ) -> list[dict[str, Any]]:
        """The request's tools: the agent's own (`base`) and this profile's skill tools."""
        ...

    def system(self, ctx: PromptContext) -> str:
        """The system prompt of the next request."""
        ...

    def invocation_form(self, config: AgentConfig) -> tuple[str, Rendering]:
        """The tool the rules check an invocation as, and how the body is rendered."""
        ...

    def call_subject(self, block: dict[str, Any]) -> tuple[str, str]:
        """The skill and the arguments a call of one of this profile's tools names (for hooks)."""
        ...

    async def handle(self, session: SkillSession, block: dict[str, Any]) -> ToolAnswer:
        """Answer one of this profile's tool calls."""
        ...

    def deliver_slash(
        self, session: SkillSession, messages: Sequence[StoredMessage]
    ) -> list[StoredMessage]:
        """The rows a user's `/name` stores, given the invocation's status and hidden rows."""
        ...

    def fork_messages(self, skill: str, prompt: str) -> list[StoredMessage]:
        """The first rows of a forked skill's subagent, given the rendered skill."""
        ...


def not_to_model(message: StoredMessage) -> StoredMessage:
    """The same row, kept from the model (a chip standing for content delivered elsewhere)."""
    return StoredMessage(
        role=message.role,
        content=message.content,
        kind=message.kind,
        is_meta=message.is_meta,
        to_model=False,
        meta=message.meta,
    )


def skill_prompt_rows(skill: str, prompt: str) -> list[StoredMessage]:
    """A subagent's first row: the rendered skill as a hidden user message (its task)."""
    meta = {"skill": skill}
    return [StoredMessage.text("user", prompt, kind="skill_prompt", is_meta=True, meta=meta)]
