"""One model call as the runner sees it: `ports.call_model` streamed to its end, the answer kept.

The ports admit, announce, record and settle the call; this module only follows the stream. It
keeps the pieces of the answer that have arrived, so a run cancelled mid-answer can store the text
the user already saw.
"""

from __future__ import annotations

from typing import Any

from .events import BlockDone, MessageDone, TextDelta
from .llm import ModelError, ModelRequest
from .ports import RunPorts


class ModelStream:
    """Streams model calls one at a time and remembers the answer in progress."""

    def __init__(self, ports: RunPorts) -> None:
        self.ports = ports
        # Text pieces per block (joined on demand: growing a str would be quadratic), and the
        # blocks already complete, of the answer being streamed.
        self._text: dict[int, list[str]] = {}
        self._blocks: dict[int, dict[str, Any]] = {}

    async def answer(self, request: ModelRequest, *, call: int, skill: str) -> dict[str, Any]:
        """The whole assistant message; ModelError("stream_cut") when the stream ends without it."""
        self._text, self._blocks = {}, {}
        final: dict[str, Any] | None = None
        # Read to its end: the ports settle the call as the stream ends (a cancellation reaches
        # them inside the stream, where the run waits).
        async for event in self.ports.call_model(request, call=call, skill=skill):
            if isinstance(event, TextDelta):
                self._text.setdefault(event.index, []).append(event.text)
            elif isinstance(event, BlockDone):
                self._blocks[event.index] = event.block
            elif isinstance(event, MessageDone):
                final = event.message
        self._text, self._blocks = {}, {}
        if final is None:
            raise ModelError(
                kind="stream_cut",
                message="The model's answer ended unexpectedly. Try again.",
                retryable=True,
                partial_content=[],
            )
        return final

    def take_partial(self) -> list[dict[str, Any]]:
        """The text blocks of an interrupted answer (complete ones and the one being written)."""
        blocks: list[dict[str, Any]] = []
        for index in sorted(set(self._text) | set(self._blocks)):
            done = self._blocks.get(index)
            if done is not None:
                if done.get("type") == "text":
                    blocks.append(done)
            elif index in self._text:
                blocks.append({"type": "text", "text": "".join(self._text[index])})
        self._text, self._blocks = {}, {}
        return blocks
