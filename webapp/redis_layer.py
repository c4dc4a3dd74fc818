"""The Redis channel layer, made to ride out Redis restarts and outages however long.

Why this is not a stock layer (measured against both in one session, bench/RESULTS.md, "today's
Redis layer against the stock channels-redis layers"): stock `RedisChannelLayer` closes every
open tab when Redis restarts or goes away, and stock `RedisPubSubChannelLayer` refuses every new
tab (HTTP 500) while Redis is away and logs a traceback per frame sent; both failed the fault
suite's Redis cases (tests/multiprocess/test_faults.py), which this layer passes. CPU is not the
reason: pub/sub used no more than this layer (its p99 was 1.2-4.4 times this layer's, on a busy
machine). A pub/sub subclass that adds only the outage handling is the way back to a stock layer.

channels-redis passes every Redis error to its caller. A Redis restart then left each process
with pooled connections the server had closed: the first websocket opened after it failed with
HTTP 500 (its `group_add` met a dead connection), and every worker exited (its `receive` raised),
interrupting every answer and, within a 45-second outage, using up the service's start limit.
This subclass keeps channels-redis's semantics and adds:

- A dead pooled connection is not an outage: a call that fails with a connection error drops the
  pool's idle connections and is tried once more at once (a new connection). Redis may have
  restarted meanwhile, quickly enough that the new connection works: a restarted Redis has no
  groups, so before the retry this process's memberships are added again, and its channels in a
  group are told (`layer.resumed`) to catch up on what they missed from the database. Without
  that, a tab whose web process met the restart this way heard nothing more of its answer.
- An outage (the second attempt fails too) is logged once (`skills_app.core.outages`), and from
  then on nothing waits on Redis: `group_send` drops the message (stored events are in the
  database, and every tab fills a gap in the seqs or in a stream's offsets from there, as it
  does when a full channel drops a message); `send` raises `LayerUnavailable` at once (callers
  treat a wake-up or a stop as best effort: the queue and the stop flag are in the database);
  `group_add` / `group_discard` are remembered and applied when Redis is back; `receive` waits.
- One probe per process retries with backoff (0.5 s doubling to 10 s). When Redis answers, the
  remembered group memberships of this process's channels are added again (a restarted Redis
  has none), `receive` resumes, and every channel of this process that is in a group gets a
  `layer.resumed` message, so its consumer catches up on what it missed from the database.

No process exits because Redis is away: the worker's listeners and the consumers' receives just
wait, and the runs go on streaming into the database.

Receiving: channels-redis takes a process's messages out of Redis one at a time, with four
commands each (put back what a cancelled receive left, a blocking pop, a backup copy, the copy's
removal): about half of a web process's CPU while it relays 100 live answers, and what let it
fall behind (bench/PROFILE.md). Here the messages waiting for this process's channels come out in
one script, up to RECEIVE_BATCH at a time, and are handed out in order from memory; only when
none are waiting does a receive wait the way channels-redis does. The script runs in a task of
its own that a cancelled receive does not cancel, so nothing it took out is lost: the next
receive gets it.

Sending: the live text of a batch of runs goes out with `group_send_many`, two round trips per
Redis for the whole batch (one pipeline reads the groups' members, one stored script adds every
message) instead of four per message: a third of a worker's CPU while it streamed 100 answers.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import defaultdict, deque
from collections.abc import Sequence
from typing import Any

from channels_redis.core import RedisChannelLayer

from skills_app.core.outages import Backoff, Outage

logger = logging.getLogger("skills_app.ops.channel_layer")

# The message a channel of this process gets when Redis is back (its consumer catches up).
RESUMED = "layer.resumed"

# At most this many waiting messages come out of Redis in one script (see the module's docstring).
RECEIVE_BATCH = 100

# KEYS: a channel's queue and its backup; ARGV: how many. What a cancelled receive of
# channels-redis left in the backup goes back to the queue first (as channels-redis does before
# each of its pops), then up to ARGV[1] messages come out, oldest first: member, score, ...
_POP_WAITING = """
local backed_up = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
for i = #backed_up, 1, -2 do
    redis.call('ZADD', KEYS[1], backed_up[i], backed_up[i - 1])
end
redis.call('DEL', KEYS[2])
return redis.call('ZPOPMIN', KEYS[1], ARGV[1])
"""


# KEYS: the channel keys a batch of group messages goes to, a key once per message it gets;
# ARGV: the messages, then each key's capacity, then the time and the expiry. channels-redis's
# group_send per message, with its cleaning of expired messages folded in; a message over a
# channel's capacity is dropped, as there. Each message gets its own score (the time plus a
# microsecond per message): a channel's messages of one batch come out in the order given. The
# score is counted in whole microseconds and written out digit by digit: `%.6f` of the time plus
# a fraction could round two neighbours to the same score, and Redis orders equal scores by the
# message's bytes.
_SEND_MANY = """
local n = #KEYS
local now = tonumber(ARGV[2 * n + 1])
local expiry = tonumber(ARGV[2 * n + 2])
local micros = math.floor(now * 1000000)
local dropped = 0
for i = 1, n do
    redis.call('ZREMRANGEBYSCORE', KEYS[i], 0, math.floor(now) - expiry)
    if redis.call('ZCOUNT', KEYS[i], '-inf', '+inf') < tonumber(ARGV[n + i]) then
        local at = micros + i - 1
        local score = string.format('%d.%06d', math.floor(at / 1000000), at % 1000000)
        redis.call('ZADD', KEYS[i], score, ARGV[i])
        redis.call('EXPIRE', KEYS[i], expiry)
    else
        dropped = dropped + 1
    end
end
return dropped
"""
_SEND_MANY_SHA = hashlib.sha1(_SEND_MANY.encode()).hexdigest()


class LayerUnavailable(ConnectionError):
    """Redis is away: the message was not sent (the layer retries in the background)."""


def is_connection_error(exc: BaseException) -> bool:
    """A lost or refused connection (redis-py's ConnectionError/TimeoutError, or an OSError)."""
    if isinstance(exc, OSError | TimeoutError):
        return True
    return any(
        cls.__name__ in ("ConnectionError", "TimeoutError") and cls.__module__.startswith("redis")
        for cls in type(exc).__mro__
    )


class ResilientRedisChannelLayer(RedisChannelLayer):
    """channels-redis's layer that retries a dead connection once and waits out an outage."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.up = True
        self.dropped = 0  # group messages dropped while Redis was away (tests, the ops page)
        self.outage = Outage("the channel layer (Redis)", logger)
        self._backoff = Backoff(first=0.5, cap=10.0)
        self._back: asyncio.Event | None = None
        self._probe: asyncio.Task[None] | None = None
        # group -> channels of this process in it, for the channels named by this process.
        self._members: dict[str, set[str]] = {}
        # Messages taken out of Redis for this process's channels and not handed out yet, and
        # the task taking them out, per process channel.
        self._taken: dict[str, deque[tuple[str, dict[str, Any]]]] = {}
        self._taking: dict[str, asyncio.Task[None]] = {}
        # The restoring after a dead connection, per event loop: the calls that meet the same
        # restart at once share one.
        self._restoring: dict[asyncio.AbstractEventLoop, asyncio.Task[None]] = {}

    # -- the calls --------------------------------------------------------------------------

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        await self._call(super().send, channel, message)

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        try:
            await self._call(super().group_send, group, message)
        except LayerUnavailable:
            self.dropped += 1

    async def group_send_many(self, items: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """Send each (group, message), as `group_send` would, in two round trips per Redis.

        For the live text of a batch of runs (`skills_app.runs.streams`): channels-redis takes
        four round trips for every group message (drop the group's expired members, read them,
        drop each channel's expired messages, add the message), most of a worker's CPU while it
        streams 100 answers. Here the members of every group come in one pipeline, and every
        message goes out in one script. Messages to one channel keep the order given.
        """
        if not items:
            return
        try:
            await self._call(self._send_many, items)
        except LayerUnavailable:
            self.dropped += len(items)

    async def _send_many(self, items: Sequence[tuple[str, dict[str, Any]]]) -> None:
        layer: Any = self  # channels-redis's helpers (the type stubs do not declare them)
        now = time.time()
        members: dict[str, list[str]] = {}
        groups_by_index: dict[int, list[str]] = defaultdict(list)
        for group in dict.fromkeys(group for group, _ in items):
            assert layer.require_valid_group_name(group), "Group name not valid"
            groups_by_index[layer.consistent_hash(group)].append(group)
        for index, groups in groups_by_index.items():
            pipe = self.connection(index).pipeline(transaction=False)
            for group in groups:
                key = layer._group_key(group)
                pipe.zremrangebyscore(key, min=0, max=int(now) - self.group_expiry)
                pipe.zrange(key, 0, -1)
            replies = await pipe.execute()
            for group, names in zip(groups, replies[1::2], strict=True):
                members[group] = [name.decode("utf8") for name in names]
        # Per Redis: the keys, each message as serialised for its key, and each key's capacity.
        sends: dict[int, tuple[list[bytes], list[bytes], list[int]]] = defaultdict(
            lambda: ([], [], [])
        )
        for group, message in items:
            keys_by_index, messages, capacities = layer._map_channel_keys_to_connection(
                members[group], message
            )
            for index, keys in keys_by_index.items():
                send = sends[index]
                for key in keys:
                    send[0].append(key)
                    send[1].append(messages[key])
                    send[2].append(capacities[key])
        for index, (keys, messages, capacities) in sends.items():
            connection = self.connection(index)
            args: list[bytes | int | str] = [
                *keys,
                *messages,
                *capacities,
                repr(now),
                int(self.expiry),
            ]
            try:
                dropped = await connection.evalsha(_SEND_MANY_SHA, len(keys), *args)
            except Exception as exc:
                if type(exc).__name__ != "NoScriptError":
                    raise
                dropped = await connection.eval(_SEND_MANY, len(keys), *args)  # Redis restarted
            if dropped:
                logger.info("%s messages over a channel's capacity were dropped", dropped)

    async def group_add(self, group: str, channel: str) -> None:
        if self._is_ours(channel):
            self._members.setdefault(group, set()).add(channel)
        try:
            await self._call(super().group_add, group, channel)
        except LayerUnavailable:
            pass  # added again when Redis is back

    async def group_discard(self, group: str, channel: str) -> None:
        members = self._members.get(group)
        if members is not None:
            members.discard(channel)
            if not members:
                del self._members[group]
        try:
            await self._call(super().group_discard, group, channel)
        except LayerUnavailable:
            pass  # a restarted Redis has forgotten it; an old one lets it expire

    async def receive(self, channel: str) -> dict[str, Any]:
        retried = False
        while True:
            if not self.up:
                await self._wait_until_back()
            try:
                message: dict[str, Any] = await super().receive(channel)
                return message
            except Exception as exc:
                if not is_connection_error(exc):
                    raise
                if not retried and self.up:
                    retried = True
                    try:
                        await self._reconnect()
                    except Exception as again:
                        if not is_connection_error(again):
                            raise
                        self._lost(again)
                        retried = False
                    continue
                self._lost(exc)
                retried = False

    async def receive_single(self, channel: str) -> tuple[str, dict[str, Any]]:
        # channels-redis's own (the type stubs do not declare it).
        wait_for_one: Any = super().receive_single  # type: ignore[misc]
        if "!" not in channel:
            return await wait_for_one(channel)  # type: ignore[no-any-return]
        if not self._taken.get(channel):
            await self._take_waiting(channel)
        taken = self._taken.get(channel)
        if taken:
            return taken.popleft()
        # Nothing waiting: wait for the next message as channels-redis does.
        return await wait_for_one(channel)  # type: ignore[no-any-return]

    async def _take_waiting(self, channel: str) -> None:
        task = self._taking.get(channel)
        if task is None or task.done():
            task = asyncio.ensure_future(self._pop_waiting(channel))
            task.add_done_callback(_retrieved)
            self._taking[channel] = task
        # A cancelled receive leaves the task running: what it takes out is handed out next.
        await asyncio.shield(task)

    async def _pop_waiting(self, channel: str) -> None:
        layer: Any = self  # channels-redis's helpers (the type stubs do not declare them)
        key = self.prefix + channel
        await layer.receive_clean_locks.acquire(key)  # no backup removal of its is under way
        try:
            popped = await self.connection(layer.consistent_hash(channel)).eval(
                _POP_WAITING, 2, key, layer._backup_channel_name(key), RECEIVE_BATCH
            )
        finally:
            layer.receive_clean_locks.release(key)
        taken = self._taken.setdefault(channel, deque())
        for content in popped[0::2]:
            message = layer.deserialize(content)
            taken.append((message.pop("__asgi_channel__", channel), message))

    async def _clean_receive_backup(self, index: int, channel: str) -> None:
        # channels-redis drops a received message's backup copy in a task nobody awaits: a
        # connection lost meanwhile would be logged as an ERROR ("Task exception was never
        # retrieved"). The copy is redelivered at worst, and consumers drop what they had.
        try:
            await super()._clean_receive_backup(index, channel)
        except Exception as exc:
            if not is_connection_error(exc):
                raise

    async def wait_until_up(self) -> None:
        """Return once Redis answers again (at once when it is not away)."""
        if not self.up:
            await self._wait_until_back()

    # -- the machinery ----------------------------------------------------------------------

    def _is_ours(self, channel: str) -> bool:
        return "!" in channel and self.client_prefix in channel

    async def _call(self, operation: Any, *args: Any) -> Any:
        if not self.up:
            raise LayerUnavailable("the channel layer (Redis) is away")
        try:
            return await operation(*args)
        except Exception as exc:
            if not is_connection_error(exc):
                raise
        # A connection Redis closed (it restarted): drop the idle ones and try once more.
        try:
            await self._reconnect()
            return await operation(*args)
        except Exception as exc:
            if not is_connection_error(exc):
                raise
            self._lost(exc)
            raise LayerUnavailable("the channel layer (Redis) is away") from exc

    async def _reconnect(self) -> None:
        """After a dead connection: new connections, and what a restarted Redis forgot."""
        await self._drop_idle_connections()
        loop = asyncio.get_running_loop()
        task = self._restoring.get(loop)
        if task is None or task.done():
            task = loop.create_task(self._restore())
            task.add_done_callback(_retrieved)
            # Forgotten once done: the layer outlives loops (asgiref's sync-to-async calls).
            task.add_done_callback(
                lambda done: (
                    self._restoring.pop(loop, None) if self._restoring.get(loop) is done else None
                )
            )
            self._restoring[loop] = task
        await asyncio.shield(task)

    async def _restore(self) -> None:
        await self._add_memberships_again()
        self._tell_channels_to_catch_up()

    async def _add_memberships_again(self) -> None:
        # A restarted Redis has no groups.
        for group, channels in list(self._members.items()):
            for channel in list(channels):
                await super().group_add(group, channel)

    def _tell_channels_to_catch_up(self) -> None:
        # Consumers catch up from the database on what the group sent while Redis forgot them.
        for channel in {c for channels in self._members.values() for c in channels}:
            self.receive_buffer[channel].put_nowait({"type": RESUMED})

    async def _drop_idle_connections(self) -> None:
        loop_layer = self._layers.get(asyncio.get_running_loop())
        if loop_layer is None:
            return
        for connection in list(loop_layer._connections.values()):
            try:
                await connection.connection_pool.disconnect(inuse_connections=False)
            except Exception:  # noqa: BLE001 - a pool that cannot even close is replaced anyway
                logger.debug("dropping idle Redis connections failed", exc_info=True)

    def _lost(self, exc: BaseException) -> None:
        if self.up:
            self.up = False
            self._backoff.reset()
            self.outage.failed(exc, retry_in=self._backoff.first)
        else:
            self.outage.failed(exc)
        if self._probe is None or self._probe.done():
            self._probe = asyncio.get_running_loop().create_task(self._until_back())

    async def _wait_until_back(self) -> None:
        if self._back is None:
            self._back = asyncio.Event()
        if self._probe is None or self._probe.done():
            self._probe = asyncio.get_running_loop().create_task(self._until_back())
        await self._back.wait()

    async def _until_back(self) -> None:
        """Probe Redis with backoff until it answers, then restore what this process had."""
        while True:
            interval = self._backoff.next()
            if self._backoff.capped:
                self.outage.capped(interval)
            await asyncio.sleep(interval)
            try:
                await self._drop_idle_connections()
                for index in range(self.ring_size):
                    await self.connection(index).ping()
                await self._add_memberships_again()
            except Exception as exc:
                if not is_connection_error(exc):
                    logger.exception("the channel layer's probe failed; trying again")
                self.outage.failed(exc, retry_in=self._backoff.current)
                continue
            break
        self.up = True
        self._backoff.reset()
        self.outage.recovered()
        if self._back is not None:
            self._back.set()
            self._back = None
        self._tell_channels_to_catch_up()


def _retrieved(task: asyncio.Task[None]) -> None:
    # Awaited by a receive, or by none if it was cancelled: either way not an unretrieved error
    # (the next receive takes the messages out again, or meets the same failure itself).
    if not task.cancelled():
        task.exception()
