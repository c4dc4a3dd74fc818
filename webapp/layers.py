"""The in-memory channel layer of the one-process deployment, without its per-message sweeps.

Channels' InMemoryChannelLayer walks every channel and every group membership on each receive
and group_send to expire old messages, builds a new asyncio.Queue on every send and receive
(even when the channel has one), gives every group member its own task and deep-copies every
message generically. At 50 streaming conversations (about 1,000 group messages a second, each
to every tab of its conversation) those sweeps cost more CPU than relaying the text itself,
measured in bench/bench_concurrency.py. This subclass keeps the semantics (capacity, expiry,
groups, copies isolated per receiver) and changes only the cost: expiry is swept at most once
per SWEEP_SECONDS, a channel's queue is made once and kept while its consumer receives (the
sweep drops the empty ones nobody waits on), group members are sent to in a loop, and
JSON-like messages are copied by a small recursive copy.
"""

from __future__ import annotations

import asyncio
import time
from copy import deepcopy
from typing import Any

from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer as ChannelsInMemoryLayer

SWEEP_SECONDS = 1.0


class InMemoryChannelLayer(ChannelsInMemoryLayer):
    """Channels' in-memory layer with its housekeeping paid once a second, not per message."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._swept = 0.0
        # Receives waiting on each channel's queue (a queue in use is never dropped).
        self._receiving: dict[str, int] = {}

    def _clean_expired(self) -> None:
        now = time.monotonic()
        if now - self._swept >= SWEEP_SECONDS:
            self._swept = now
            # A private method of Channels' layer, which typeshed's stubs leave out.
            super()._clean_expired()  # type: ignore[misc]
            for channel, queue in list(self.channels.items()):
                if queue.empty() and channel not in self._receiving:
                    del self.channels[channel]

    def _queue(self, channel: str) -> asyncio.Queue[tuple[float, dict[str, Any]]]:
        queue = self.channels.get(channel)
        if queue is None:
            queue = self.channels[channel] = asyncio.Queue(maxsize=self.get_capacity(channel))
        return queue

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_channel_name(channel)
        assert "__asgi_channel__" not in message
        try:
            self._queue(channel).put_nowait((time.time() + self.expiry, _copy(message)))
        except asyncio.QueueFull:
            raise ChannelFull(channel) from None

    async def receive(self, channel: str) -> dict[str, Any]:
        self.require_valid_channel_name(channel)
        self._clean_expired()
        queue = self._queue(channel)
        self._receiving[channel] = self._receiving.get(channel, 0) + 1
        received = False
        try:
            _expires, message = await queue.get()
            received = True
        finally:
            waiting = self._receiving.pop(channel) - 1
            if waiting:
                self._receiving[channel] = waiting
            # A receive that got its message keeps the queue for the next one (a consumer
            # receives again at once: a new queue per message was a tenth of relaying a frame);
            # one cancelled (the consumer left) takes its empty queue with it, and the sweep
            # drops empty queues nobody waits on.
            if not received and not waiting and queue.empty():
                self.channels.pop(channel, None)
        return message

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        assert isinstance(message, dict), "Message is not a dict"
        self.require_valid_group_name(group)
        self._clean_expired()
        for channel in list(self.groups.get(group, {})):
            try:
                await self.send(channel, message)
            except ChannelFull:
                pass  # as Channels does: a full channel misses it (the consumer fills gaps)


def _copy(value: Any) -> Any:
    """A copy no receiver shares with another: JSON-like values by hand, the rest by deepcopy."""
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return deepcopy(value)
