"""Readiness: can this process serve a whole chat (database, channel layer, a run worker)?

Each check answers with a short category, never an exception text, a host name or a path: the
probes are unauthenticated. What went wrong is logged here instead, for the operator, once when a
check starts failing and once when it passes again (`outages`), not at every probe.

Probes are cheap to send and each readiness check costs a database query and a channel-layer
round trip, so a flood of requests must not become a flood of checks: one check runs at a time
per process, requests arriving meanwhile wait for its answer, and an answer is reused for
`REUSE_SECONDS`. Each check is bounded by `CHECK_TIMEOUT`; a database call that outlives it is
left to finish in its thread and no second one is started until it does.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import threading
import time
import weakref
from dataclasses import dataclass

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import DatabaseError, connection

from skills_app.core.outages import Outage

logger = logging.getLogger(__name__)

CHECK_TIMEOUT = 2.0
REUSE_SECONDS = 1.0

# A probe asks every few seconds: what it finds is logged when it changes, not at every ask.
DATABASE = Outage("the database", logger, who="readiness")
LAYER = Outage("the channel layer", logger, who="readiness")

OK = "ok"
UNREACHABLE = "unreachable"
TIMEOUT = "timeout"
ERROR = "error"
NO_WORKER = "none alive"
NOT_USED = "not used"
# Check results that do not make the process unready.
PASSING = frozenset({OK, NOT_USED})


@dataclass(frozen=True, slots=True)
class Readiness:
    """Each check's category, and whether all of them pass."""

    checks: dict[str, str]

    @property
    def ready(self) -> bool:
        return all(status in PASSING for status in self.checks.values())


def live_workers() -> int:
    """How many run workers are registered and beating (`runs.liveness`)."""
    from ..runs.liveness import live_workers as count

    return count()


def _query_database() -> None:
    # On the request's own thread: its connection is closed when the request ends (webapp/asgi.py).
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()


class _OneAtATime:
    """Runs a blocking check in a thread, never two at once (a hung one blocks only itself)."""

    def __init__(self) -> None:
        self._busy = threading.Lock()

    def __call__(self) -> str:
        if not self._busy.acquire(blocking=False):
            return TIMEOUT  # the previous call is still stuck
        try:
            _query_database()
        except DatabaseError as exc:
            DATABASE.failed(exc)
            return UNREACHABLE
        except Exception:
            logger.exception("readiness: the database check failed")
            return ERROR
        finally:
            self._busy.release()
        DATABASE.recovered()
        return OK


_database_once = _OneAtATime()


async def check_database() -> str:
    try:
        return await asyncio.wait_for(
            sync_to_async(_database_once, thread_sensitive=True)(), CHECK_TIMEOUT
        )
    except TimeoutError:
        DATABASE.failed(TimeoutError(f"no answer within {CHECK_TIMEOUT:g} s"))
        return TIMEOUT


def _is_connection_error(exc: BaseException) -> bool:
    # redis-py's ConnectionError is not the builtin one; match it by name, without importing redis.
    return isinstance(exc, OSError) or any(
        cls.__name__ == "ConnectionError" for cls in type(exc).__mro__
    )


# The channel each event loop's check receives on, made once: on a pub/sub layer every new
# channel is a subscription that stays while the process lives.
_CHECK_CHANNELS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, str] = (
    weakref.WeakKeyDictionary()
)


async def check_channel_layer() -> str:
    """Send a message to this process's check channel and receive it back."""
    layer = get_channel_layer()
    if layer is None:
        return ERROR
    token = secrets.token_hex(8)
    loop = asyncio.get_running_loop()

    async def round_trip() -> bool:
        channel = _CHECK_CHANNELS.get(loop)
        if channel is None:
            channel = _CHECK_CHANNELS[loop] = await layer.new_channel()
        await layer.send(channel, {"type": "readyz.ping", "token": token})
        while True:  # an answer to an earlier check that timed out may come first
            message = await layer.receive(channel)
            if message.get("token") == token:
                return True

    try:
        same = await asyncio.wait_for(round_trip(), CHECK_TIMEOUT)
    except BaseException as exc:
        # A cancelled receive ends its channel on a pub/sub layer: the next check makes another.
        _CHECK_CHANNELS.pop(loop, None)
        if not isinstance(exc, Exception):
            raise
        return _failed(exc)
    LAYER.recovered()
    return OK if same else ERROR


def _failed(exc: Exception) -> str:
    if isinstance(exc, TimeoutError):
        LAYER.failed(TimeoutError(f"no answer within {CHECK_TIMEOUT:g} s"))
        return TIMEOUT
    if _is_connection_error(exc):
        LAYER.failed(exc)
        return UNREACHABLE
    logger.exception("readiness: the channel layer check failed")
    return ERROR


async def check_workers() -> str:
    if settings.RUN_EXECUTOR != "worker":
        return NOT_USED
    try:
        count = await asyncio.wait_for(
            sync_to_async(live_workers, thread_sensitive=True)(), CHECK_TIMEOUT
        )
    except TimeoutError:
        return TIMEOUT
    except DatabaseError:
        return UNREACHABLE  # the database check says more
    return OK if count > 0 else NO_WORKER


async def _check_all() -> Readiness:
    database, layer, workers = await asyncio.gather(
        check_database(), check_channel_layer(), check_workers()
    )
    return Readiness({"database": database, "channel_layer": layer, "workers": workers})


class ReadinessProbe:
    """Readiness answers computed at most once at a time and reused briefly (see the module doc).

    Each request computes in its own context (its own database thread), under a per-loop lock:
    a request that waited for the lock finds the fresh answer and returns it without checking.
    """

    def __init__(self) -> None:
        self._answer: tuple[float, Readiness] | None = None
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        self.checks_run = 0  # how many real checks ran (tests, and the operator page)

    def forget(self) -> None:
        """Drop the remembered answer (tests; after a configuration change)."""
        self._answer = None

    def _fresh(self) -> Readiness | None:
        if self._answer is not None and time.monotonic() - self._answer[0] < REUSE_SECONDS:
            return self._answer[1]
        return None

    async def __call__(self) -> Readiness:
        answer = self._fresh()
        if answer is not None:
            return answer
        lock = self._locks.setdefault(asyncio.get_running_loop(), asyncio.Lock())
        async with lock:
            answer = self._fresh()
            if answer is None:
                self.checks_run += 1
                answer = await _check_all()
                self._answer = (time.monotonic(), answer)
            return answer


readiness = ReadinessProbe()
