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
from ..tools.base import ToolContext
from ..transcript import StoredMessage

# A row stored after the turn's tool results, with the invocation it belongs to.
StoredRow = tuple[StoredMessage, InvocationRef | None]


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


class SkillSession(Protocol):
    """What a profile may use of the run that calls it."""

    @property
    def skills(self) -> SkillProvider: ...

    @property
    def history(self) -> Sequence[StoredMessage]: ...

    @property
    def state(self) -> TurnState: ...

    def tool_context(self) -> ToolContext:
        """The tools' context with the turn's environment (the invoked skill's directory)."""
        ...

    async def invoke(
        self, name: str, args: str, *, caller: str, tool_use_id: str | None
    ) -> SkillOutcome:
        """Validate, check `Skill(NAME)`, render and audit one invocation."""
        ...

    def forks(self, name: str) -> bool:
        """True when the skill runs as a subagent (`context: fork`)."""
        ...

    async def run_fork(self, name: str, outcome: SkillOutcome) -> ForkResult:
        """Run an invoked `context: fork` skill as a subagent."""
        ...

    async def decide(self, call: ToolCall) -> Decision:
        """Decide a call under the turn's rules, asking the user when they say ask."""
        ...


class DeliveryProfile(Protocol):
    """One design for delivering skills; see `profiles/__init__.py` for the registry."""

    name: ClassVar[str]
    label: ClassVar[str]
    # The tool names this profile answers (and only these).
    tool_names: ClassVar[frozenset[str]]

    def tools(self, skills: Sequence[SkillSpec], config: AgentConfig) -> list[dict[str, Any]]:
        """The skill tools to offer, given the model-invocable skills."""
        ...

    def system(
        self,
        base: str,
        skills: Sequence[SkillSpec],
        history: Sequence[StoredMessage],
        *,
        skills_allowed: bool,
    ) -> str:
        """The system prompt of the next request."""
        ...

    async def handle(self, session: SkillSession, block: dict[str, Any]) -> ToolAnswer:
        """Answer one of this profile's tool calls."""
        ...

    def deliver_slash(self, messages: Sequence[StoredMessage]) -> list[StoredMessage]:
        """The rows a user's `/name` stores, given the invocation's status and hidden rows."""
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
