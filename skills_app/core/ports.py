"""RunPorts: everything the runner needs from the world, as one typed protocol.

The runner calls the model, decides tool calls, records what it produces and stages skills only
through these methods; the services implement them over the database, the channel layer and the
user's approvals. Tests implement them in memory.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from .agent import ForkResult, InvocationRef, TurnState
from .events import ModelEvent, RunEvent
from .llm import ModelRequest
from .permissions import Decision, ToolCall
from .skillfile import SkillSpec
from .transcript import StoredMessage


@dataclass(frozen=True, slots=True)
class InvocationRecord:
    """The audit of one attempt to invoke a skill, successful or not."""

    skill: str
    args: str
    caller: str  # user | model
    tool_use_id: str = ""
    source: str = ""
    digest: str = ""
    decision: str = ""  # allowed | denied | failed
    decided_by: str = ""
    approval_id: int | None = None
    error_code: str = ""
    error: str = ""
    status_text: str = ""
    injected_text: str = ""
    allowed_tools: tuple[str, ...] = ()
    disallowed_tools: tuple[str, ...] = ()
    model_override: str = ""
    # The skill's `model:` when the person's policy does not offer it (the turn kept its model).
    model_refused: str = ""
    already_loaded: bool = False
    skill_dir: str = ""
    shell_commands: tuple[dict[str, Any], ...] = ()
    hooks: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class ToolAudit:
    """A tool call made while a skill's turn was active, for that skill's audit."""

    tool_use_id: str
    tool: str
    input: dict[str, Any] = field(default_factory=dict)
    is_error: bool = False
    decision: str | None = None
    reason: str | None = None


class RunPorts(Protocol):
    """The runner's side effects; one implementation per environment (services, tests)."""

    def call_model(
        self, request: ModelRequest, *, call: int, skill: str
    ) -> AsyncIterator[ModelEvent]:
        """Make model call number `call` of the run (`skill`: the skill invoked last in the turn,
        "" before any): the one place a call is admitted, announced, streamed and settled.

        Admission comes first (CallRefused before anything is recorded or sent); then the call is
        announced (`ModelCalled`) and each event of the model's stream is recorded for whoever
        watches the run before it is yielded; `MessageDone` comes last, once the call's usage and
        cost are settled. A ModelError, or a cancellation, settles the call as failed and goes on
        up.
        """
        ...

    async def decide(self, call: ToolCall, state: TurnState) -> Decision:
        """The rules, and the user when they say ask; the Decision names its approval."""
        ...

    async def check(self, call: ToolCall, state: TurnState) -> Decision:
        """The rules alone, never asking (for `!` commands and skill hooks)."""
        ...

    async def record_message(
        self, message: StoredMessage, *, invocation: InvocationRef | None = None
    ) -> None:
        """Store one message of the conversation."""
        ...

    async def exclude_turn(self, reason: str) -> None:
        """Mark the latest turn's stored rows excluded (`transcript.exclude_turn`) for `reason`."""
        ...

    async def record_invocation(self, record: InvocationRecord) -> InvocationRef | None:
        """Store the audit of a skill invocation; its reference links later rows to it."""
        ...

    async def record_tool_call(self, invocation: InvocationRef, audit: ToolAudit) -> None:
        """Audit a tool call made under an invoked skill."""
        ...

    async def path_filter(self, state: TurnState) -> Callable[[str], bool] | None:
        """Which files searches may show under the turn's rules (Read deny/ask rules hide files)."""
        ...

    async def stage_skill(self, spec: SkillSpec) -> str:
        """Copy the skill into the workspace (read-only); its directory there."""
        ...

    async def emit(self, event: RunEvent) -> None:
        """Announce an event to whoever watches the run."""
        ...

    async def fork(self, spec: SkillSpec, prompt: str) -> ForkResult:
        """Run a `context: fork` skill as a subagent; ok=False when that is not possible."""
        ...


__all__ = ["InvocationRecord", "RunPorts", "ToolAudit"]
