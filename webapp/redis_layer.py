"""The Redis channel layer: channels-redis's pub/sub layer, waiting out a Redis outage quietly.

The layer is stock `channels_redis.pubsub.RedisPubSubChannelLayer`, used through its public
methods only. Every tab fills gaps from the database (a seq or a stream offset it did not get), so
a pub/sub layer that keeps no queue in Redis loses nothing a tab needs. The settings give
redis-py a `Retry` and health checks: a publish on a pooled connection that a Redis restart
closed is retried on a new connection, and the subscriber's connection reconnects and subscribes
again to every channel and group of the process.

What the stock layer does not do while Redis is away, and this wrapper adds. Measured reason
(bench/RESULTS.md, the stock channels-redis layers compared): alone, the stock layer failed the
fault suite's 25 s outage case (tests/multiprocess/test_faults.py: HTTP 500 for a tab opened
meanwhile, 1.1 MB of tracebacks from one worker); with the wrapper both Redis cases pass, and at
100 x 50 deltas/s the web processes used 40 % less CPU than with the fork this replaced, the
workers 10 % less.

- A tab still opens: the stock `new_channel` subscribes at once and raises, so the websocket got
  HTTP 500. Here the channel is named without Redis; its memberships are remembered, and its first
  receive once Redis is back subscribes a stock channel for it, adds it to those groups and
  returns `layer.resumed` (its consumer catches up from the database).
- Nothing waits on Redis and nothing floods the log: once a call has failed, `group_send` drops
  its message (stored events are in the database), `send` raises `LayerUnavailable` (wake-ups and
  stops are best effort: the queue and the stop flag are in the database), `group_add` and
  `group_discard` are remembered, `receive` waits. The stock receive task logs a traceback for
  each failed read, about one a second: those records (a connection error) are dropped by a
  filter on its logger, and tell this layer that Redis is away. The outage is logged once when it
  starts and once when it ends (`skills_app.core.outages`).
- One probe per event loop retries with backoff (0.5 s doubling to 10 s): a round trip through a
  channel of its own. When it answers, the memberships made while Redis was away are added, and
  every channel of the loop that is in a group gets `layer.resumed`, so its consumer fetches what
  the group sent meanwhile.

Known limits: a channel named while Redis was away receives under another (stock) name, so a
message another process sends to its own name is lost: only a worker started during an outage
has such a channel, and a stop then reaches its run by the stop flag. Pub/sub has no queues: a
`run.execute` wake-up reaches every worker listening on `skillscope-runs` (one claims the run).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
import weakref
from dataclasses import dataclass, field
from typing import Any

from channels_redis.pubsub import RedisPubSubChannelLayer
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from skills_app.core.outages import Backoff, Outage

logger = logging.getLogger("skills_app.ops.channel_layer")

# The message a channel of this process gets when Redis is back (its consumer catches up).
RESUMED = "layer.resumed"

# The probe's round trip through Redis must finish within this many seconds.
PROBE_TIMEOUT = 2.0

# In the name of a channel named while Redis was away (it has no stock channel yet).
AWAY_MARK = "away-"

# The logger of the stock layer's receive task (one traceback per failed read while Redis is away).
STOCK_LOGGER = "channels_redis.pubsub"


def redis_host(address: str) -> dict[str, Any]:
    """The settings' Redis host: redis-py's options for connections that die or hang.

    A command on a connection a Redis restart closed is tried again on a new one (twice, within
    a second); an idle connection is checked before use; one to a Redis that is away fails
    within 2 s, not 30.
    """
    return {
        "address": address,
        "retry": Retry(ExponentialWithJitterBackoff(base=0.05, cap=0.5), 2),
        "health_check_interval": 15,
        "socket_keepalive": True,
        "socket_connect_timeout": 2,
        "socket_timeout": 10,
    }


class LayerUnavailable(ConnectionError):
    """Redis is away: the message was not sent (the layer retries in the background)."""


def is_connection_error(exc: BaseException) -> bool:
    """A lost or refused connection, or no answer in time."""
    return isinstance(exc, RedisConnectionError | RedisTimeoutError | OSError | TimeoutError)


@dataclass
class _Loop:
    """The layer in one event loop: whether Redis answers, and what to restore when it does."""

    outage: Outage
    up: bool = True
    backoff: Backoff = field(default_factory=lambda: Backoff(first=0.5, cap=10.0))
    back: asyncio.Event = field(default_factory=asyncio.Event)
    probe: asyncio.Task[None] | None = None
    probe_channel: str | None = None
    # group -> channels of this loop in it (as the consumers named them).
    members: dict[str, set[str]] = field(default_factory=dict)
    # A channel named while Redis was away -> the stock channel it receives on, from its first
    # receive once Redis is back until the consumer leaves.
    named_away: dict[str, str] = field(default_factory=dict)


class RedisChannelLayer:
    """channels-redis's pub/sub layer that never raises or waits because Redis is away."""

    extensions = ["groups", "flush"]

    def __init__(self, *, prefix: str = "asgi", **config: Any) -> None:
        self.stock = RedisPubSubChannelLayer(prefix=prefix, **config)
        self.prefix = prefix
        self.dropped = 0  # group messages dropped while Redis was away
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Loop] = (
            weakref.WeakKeyDictionary()
        )
        _QUIET.layers.add(self)

    def __getattr__(self, name: str) -> Any:
        # Anything else of the stock layer's (its serializer, for example).
        if name == "stock":
            raise AttributeError(name)
        return getattr(self.stock, name)

    # -- the channel layer's calls --------------------------------------------------------------

    async def new_channel(self, prefix: str = "specific.") -> str:
        state = self._state()
        if state.up:
            try:
                channel: str = await self.stock.new_channel(prefix)
                return channel
            except Exception as exc:
                if not is_connection_error(exc):
                    raise
                self._lost(state, exc)
        return f"{self.prefix}{prefix}{AWAY_MARK}{uuid.uuid4().hex}"

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        state = self._state()
        if not state.up:
            raise LayerUnavailable("the channel layer (Redis) is away")
        try:
            await self.stock.send(state.named_away.get(channel) or channel, message)
        except Exception as exc:
            if not is_connection_error(exc):
                raise
            self._lost(state, exc)
            raise LayerUnavailable("the channel layer (Redis) is away") from exc

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        state = self._state()
        if not state.up:
            self.dropped += 1
            return
        try:
            await self.stock.group_send(group, message)
        except Exception as exc:
            if not is_connection_error(exc):
                raise
            self._lost(state, exc)
            self.dropped += 1

    async def group_add(self, group: str, channel: str) -> None:
        state = self._state()
        state.members.setdefault(group, set()).add(channel)
        target = self._stock_channel(state, channel)
        if not state.up or target is None:
            return  # added when Redis is back, or at the channel's first receive
        try:
            await self.stock.group_add(group, target)
        except Exception as exc:
            if not is_connection_error(exc):
                raise
            self._lost(state, exc)

    async def group_discard(self, group: str, channel: str) -> None:
        state = self._state()
        members = state.members.get(group)
        if members is not None:
            members.discard(channel)
            if not members:
                del state.members[group]
        target = self._stock_channel(state, channel)
        if target is None:
            return
        try:
            await self.stock.group_discard(group, target)
        except Exception as exc:
            # The stock layer forgot the membership already; Redis unsubscribes when it is back.
            if not is_connection_error(exc):
                raise
            self._lost(state, exc)

    async def receive(self, channel: str) -> dict[str, Any]:
        state = self._state()
        try:
            while True:
                if not state.up:
                    await state.back.wait()
                    continue
                if AWAY_MARK in channel and channel not in state.named_away:
                    try:
                        await self._subscribe_named_away(state, channel)
                    except Exception as exc:
                        if not is_connection_error(exc):
                            raise
                        self._lost(state, exc)
                        continue
                    # Its groups sent to it while it was not subscribed: catch up.
                    return {"type": RESUMED}
                target = state.named_away.get(channel) or channel
                try:
                    message: dict[str, Any] = await self.stock.receive(target)
                    return message
                except Exception as exc:
                    if not is_connection_error(exc):
                        raise
                    # Its subscribe failed: the stock layer keeps the channel without one.
                    self._lost(state, exc)
                    await state.back.wait()
                    await self._forget(target)
        except asyncio.CancelledError:
            # The consumer left (Channels cancels its receive): the stock layer unsubscribed.
            state.named_away.pop(channel, None)
            raise

    async def flush(self) -> None:
        state = self._loops.pop(asyncio.get_running_loop(), None)
        if state is not None and state.probe is not None:
            state.probe.cancel()
        await self.stock.flush()

    @property
    def up(self) -> bool:
        """False while this event loop knows Redis is away."""
        return self._state().up

    # -- the machinery --------------------------------------------------------------------------

    def _state(self) -> _Loop:
        loop = asyncio.get_running_loop()
        state = self._loops.get(loop)
        if state is None:
            state = self._loops[loop] = _Loop(Outage("the channel layer (Redis)", logger))
        return state

    @staticmethod
    def _stock_channel(state: _Loop, channel: str) -> str | None:
        """The stock layer's name of a channel; None for one named away and not subscribed yet."""
        if AWAY_MARK not in channel:
            return channel
        return state.named_away.get(channel)

    async def _subscribe_named_away(self, state: _Loop, channel: str) -> None:
        target = await self.stock.new_channel()
        for group, members in list(state.members.items()):
            if channel in members:
                await self.stock.group_add(group, target)
        state.named_away[channel] = target

    async def _forget(self, channel: str) -> None:
        """Make the stock layer forget a channel whose subscribe failed, so it subscribes again.

        The stock layer keeps such a channel's queue without a subscription, and a receive on it
        would wait for good; a cancelled receive is its public way to drop the channel.
        """
        receiving = asyncio.ensure_future(self.stock.receive(channel))
        await asyncio.sleep(0)  # it is waiting on the channel's queue
        receiving.cancel()
        await asyncio.gather(receiving, return_exceptions=True)

    def _lost(self, state: _Loop, exc: BaseException) -> None:
        if state.up:
            state.up = False
            state.back = asyncio.Event()
            state.backoff.reset()
            state.outage.failed(exc, retry_in=state.backoff.first)
        else:
            state.outage.failed(exc)
        if state.probe is None or state.probe.done():
            state.probe = asyncio.get_running_loop().create_task(self._until_back(state))

    async def _until_back(self, state: _Loop) -> None:
        """Probe Redis with backoff until it answers, then restore what this loop had."""
        while True:
            interval = state.backoff.next()
            if state.backoff.capped:
                state.outage.capped(interval)
            await asyncio.sleep(interval)
            try:
                async with asyncio.timeout(PROBE_TIMEOUT):
                    await self._round_trip(state)
                    await self._add_memberships_again(state)
            except Exception as exc:
                if not is_connection_error(exc):
                    logger.exception("the channel layer's probe failed; trying again")
                state.outage.failed(exc, retry_in=state.backoff.current)
                continue
            break
        state.up = True
        state.backoff.reset()
        state.outage.recovered()
        state.back.set()
        await self._tell_channels_to_catch_up(state)

    async def _round_trip(self, state: _Loop) -> None:
        # A publish first: it fails at once while Redis is away, leaving nothing behind.
        await self.stock.group_send("skillscope.layer.probe", {"type": "layer.probe"})
        if state.probe_channel is None:
            state.probe_channel = await self.stock.new_channel("probe.")
        token = uuid.uuid4().hex
        try:
            await self.stock.send(state.probe_channel, {"type": "layer.probe", "token": token})
            # Through the subscriber connection, after the subscriptions it made again.
            while (await self.stock.receive(state.probe_channel)).get("token") != token:
                pass
        except BaseException:
            state.probe_channel = None  # a cancelled receive unsubscribed it
            raise

    async def _add_memberships_again(self, state: _Loop) -> None:
        # Those made while Redis was away reached only this wrapper.
        for group, channels in list(state.members.items()):
            for channel in list(channels):
                target = self._stock_channel(state, channel)
                if target is not None:
                    await self.stock.group_add(group, target)

    async def _tell_channels_to_catch_up(self, state: _Loop) -> None:
        channels = {c for members in state.members.values() for c in members}
        for channel in channels:
            target = self._stock_channel(state, channel)
            if target is None:
                continue  # its first receive says it
            try:
                await self.stock.send(target, {"type": RESUMED})
            except Exception as exc:
                if not is_connection_error(exc):
                    raise
                self._lost(state, exc)
                return


class _QuietReceiveTask(logging.Filter):
    """Drops the stock receive task's traceback per failed read; the layers log the outage."""

    def __init__(self) -> None:
        super().__init__()
        self.layers: weakref.WeakSet[RedisChannelLayer] = weakref.WeakSet()

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if error is None or not is_connection_error(error):
            return True
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        for layer in list(self.layers):
            state = layer._loops.get(loop)
            if state is not None:
                layer._lost(state, error)
        return False


_QUIET = _QuietReceiveTask()
logging.getLogger(STOCK_LOGGER).addFilter(_QUIET)
