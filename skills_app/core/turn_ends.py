"""How a turn ends when it does not end with the model's answer: a model error (the partial
answer kept, the turn left out of later requests), a full context window, a call the policy
refused, a stop (every open tool call answered so the history stays valid); and the notices that
tell the person, which the model never sees.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from .admission import CallRefused
from .agent import RunOutcome
from .context_window import ContextEstimate
from .llm import ModelError
from .model_stream import ModelStream
from .ports import RunPorts
from .stop_reasons import StopNotice, failed_turn_notice
from .transcript import (
    STOPPED_RESULT,
    StoredMessage,
    close_open_tool_uses,
    exclude_turn,
    turn_start,
)

logger = logging.getLogger(__name__)

Store = Callable[..., Awaitable[None]]


class TurnSession(Protocol):
    """What ending a turn needs of the run (the Runner)."""

    @property
    def history(self) -> list[StoredMessage]: ...

    @property
    def ports(self) -> RunPorts: ...

    @property
    def stream(self) -> ModelStream: ...

    @property
    def model_calls(self) -> int: ...


class TurnEnds:
    """Ends one runner's turns, storing through `store` (the runner's own)."""

    def __init__(self, runner: TurnSession, *, store: Store) -> None:
        self.runner = runner
        self.store = store

    async def model_failed(self, exc: ModelError) -> RunOutcome:
        """Keep the partial answer, leave the turn out of later requests, say what happened."""
        await self.store_partial(exc.partial_content)
        if exc.kind == "context_window":
            notice = StopNotice(
                "context_window", exc.message, exclude_turn=True, offer_new_conversation=True
            )
        else:
            notice = failed_turn_notice(exc.message)
        await self.tell(notice, "error", code=exc.kind)
        return self.outcome("failed", error=exc.message, error_kind=exc.kind)

    async def context_full(self, estimate: ContextEstimate) -> RunOutcome:
        """The request was not sent: the figures, and the offer of a new conversation."""
        notice = StopNotice("context_window", estimate.message, offer_new_conversation=True)
        await self.tell(notice, "error", tokens=estimate.tokens, window=estimate.window)
        return self.outcome("failed", error=estimate.message, error_kind="context_window")

    async def refused(self, refused: CallRefused) -> RunOutcome:
        """The policy refused the next call before it was sent: nothing was spent on it, the turn
        so far stays (its tool results answer every tool call), and the person is told why."""
        await self.notice("error", refused.message, code=refused.code)
        return self.outcome("failed", error=refused.message, error_kind=refused.code)

    async def tell(self, notice: StopNotice, kind: str, **meta: Any) -> None:
        """Store a notice for the user; first leave its turn out of later requests if it says so."""
        if notice.exclude_turn:
            await self.exclude_turn("refusal" if notice.code == "refusal" else "failed")
        meta.setdefault("code", notice.code)
        if notice.retry:
            meta["retry"] = True
        if notice.offer_new_conversation:
            meta["offer_new_conversation"] = True
        await self.notice(kind, notice.text, **meta)

    async def exclude_turn(self, reason: str) -> None:
        """Mark the latest turn's rows excluded, here and in storage."""
        changes = exclude_turn(self.runner.history, turn_start(self.runner.history), reason)
        if not changes:
            return
        for index, row in changes.items():
            self.runner.history[index] = row
        await self.runner.ports.exclude_turn(reason)

    async def notice(self, kind: str, text: str, **meta: Any) -> None:
        """A row for the user (an error or a notice) that the model never sees."""
        await self.store(
            StoredMessage.text("assistant", text, kind=kind, to_model=False, meta=meta)
        )

    async def store_partial(self, blocks: Sequence[dict[str, Any]]) -> None:
        """Keep the text of an answer cut short (the rest of its blocks are of no use)."""
        kept = [b for b in blocks if b.get("type") == "text" and b.get("text", "").strip()]
        if kept:
            partial = StoredMessage(role="assistant", content=tuple(kept), meta={"partial": True})
            await self.store(partial)

    async def on_cancel(self) -> None:
        """Keep the partial answer and answer every open tool_use so the history stays valid."""
        try:
            await self.store_partial(self.runner.stream.take_partial())
            closing = close_open_tool_uses(self.runner.history, content=STOPPED_RESULT)
            if closing:
                await self.store(
                    StoredMessage(
                        role="user",
                        kind="tool_result",
                        content=tuple(closing),
                        meta={"stopped": True},
                    )
                )
        except Exception:  # never let cleanup hide the cancellation
            logger.exception("could not store the interrupted state")

    def outcome(self, status: str, **fields: Any) -> RunOutcome:
        """The run's outcome, with the model calls it made."""
        return RunOutcome(status=status, model_calls=self.runner.model_calls, **fields)
