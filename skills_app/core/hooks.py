"""Agent hooks: callables run at fixed points of the loop (Claude Code's hook events)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

EVENTS = ("UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop")


@dataclass(frozen=True, slots=True)
class HookResult:
    """What a hook asks for: block (UserPromptSubmit/PreToolUse) or continue (Stop), with a reason."""

    block: bool = False
    continue_: bool = False
    reason: str = ""
    value: Any = None


HookFn = Callable[[dict[str, Any]], "HookResult | None | Awaitable[HookResult | None]"]


@dataclass(slots=True)
class Hooks:
    """Hook callables per event, run in order; the first blocking result wins."""

    handlers: dict[str, list[HookFn]] = field(default_factory=dict)

    def add(self, event: str, fn: HookFn) -> None:
        if event not in EVENTS:
            raise ValueError(f"Unknown hook event {event!r}; use one of {EVENTS}")
        self.handlers.setdefault(event, []).append(fn)

    async def run(self, event: str, payload: dict[str, Any]) -> list[HookResult]:
        results: list[HookResult] = []
        for fn in self.handlers.get(event, []):
            outcome = fn(payload)
            if inspect.isawaitable(outcome):
                outcome = await outcome
            if outcome is not None:
                results.append(outcome)
        return results

    async def first_block(self, event: str, payload: dict[str, Any]) -> HookResult | None:
        for result in await self.run(event, payload):
            if result.block:
                return result
        return None
