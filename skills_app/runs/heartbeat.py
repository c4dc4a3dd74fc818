"""A worker's heartbeat on a clock of its own, beside the worker's event loop.

A worker saturated with streaming runs can leave its event loop seconds late; a heartbeat scheduled
from that loop then goes silent for WORKER_STALE_SECONDS and others take a live worker for dead
(interrupting every run it executes). So the beat is a daemon thread: it touches the heartbeats
every WORKER_HEARTBEAT_SECONDS whatever the loop is doing, and hands each `Beat` to the loop with
`call_soon_threadsafe`, where the worker follows stop flags and notices it was taken for dead.

A process that dies takes the thread with it, so real death is still noticed within
WORKER_STALE_SECONDS. A loop stuck for good (a deadlock, a call that never returns) would otherwise
be kept alive forever: the thread pings the loop every round and stops beating once the loop has
not answered for LOOP_STUCK_FACTOR * WORKER_STALE_SECONDS. Such a worker is then buried
WORKER_STALE_SECONDS later, so a stuck worker's runs are interrupted within
(LOOP_STUCK_FACTOR + 1) * WORKER_STALE_SECONDS (14 s with the defaults), while a loop that is only
late by less than LOOP_STUCK_FACTOR * WORKER_STALE_SECONDS keeps its runs.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from asgiref.sync import SyncToAsync
from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection

from skills_app.core.outages import Outage
from skills_app.runs import jobs, liveness

logger = logging.getLogger(__name__)

T = TypeVar("T")

# How many stale periods the loop may go without answering before the thread stops beating.
LOOP_STUCK_FACTOR = 3


def in_database_thread(fn: Callable[[], T]) -> T:
    """Call `fn` from a plain thread the way the worker's own database work would run.

    PostgreSQL: in the calling thread, on its own connection, tested first and replaced if an
    error or a database restart broke it (settings.py, DATABASES). SQLite: in asgiref's shared
    database thread (the one `sync_to_async` uses outside `async_to_sync`), because a second
    connection to the in-memory test database only meets table locks (see `DatabaseThread`).
    That thread is free while the event loop is blocked, so the beat still goes through.
    """
    if connection.vendor == "sqlite":
        return SyncToAsync.single_thread_executor.submit(fn).result()
    close_old_connections()
    return fn()


def beat_worker(name: str, run_ids: tuple[int, ...]) -> liveness.Beat:
    """Touch this worker's heartbeat and, while it is alive, its runs'; what the beat read."""
    alive = liveness.touch(name)
    return liveness.Beat(alive, jobs.beat(jobs.RUNS, run_ids, touch=alive))


class Heart:
    """The daemon thread that beats for one worker. The loop sets `name` (None while the worker is
    not registered) and `run_ids` (a tuple snapshot, replaced whole, never mutated)."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, deliver: Callable[[str, liveness.Beat], None]
    ):
        self._loop = loop
        self._deliver = deliver
        self.name: str | None = None
        self.run_ids: tuple[int, ...] = ()
        self._stopping = threading.Event()
        self._answered = time.monotonic()  # when the loop last ran our ping
        self.beats = 0  # beats written so far (tests wait on it)
        self.loop_stuck = False
        self.outage = Outage("the database", logger, who="worker heartbeat")
        self._thread = threading.Thread(target=self._run, name="skillscope-heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop beating and wait (bounded) for the thread; blocking, so call it off the loop."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def _pong(self) -> None:
        self._answered = time.monotonic()

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                self._round()
                self._stopping.wait(float(settings.WORKER_HEARTBEAT_SECONDS))
        finally:
            if connection.vendor != "sqlite":
                connection.close()  # this thread's own connection

    def _round(self) -> None:
        try:
            self._loop.call_soon_threadsafe(self._pong)
        except RuntimeError:
            self._stopping.set()  # the loop is closed: the worker is gone
            return
        silent = time.monotonic() - self._answered
        if silent > LOOP_STUCK_FACTOR * float(settings.WORKER_STALE_SECONDS):
            if not self.loop_stuck:
                logger.error(
                    "worker %s: its event loop has not answered for %.1f s; no more heartbeats "
                    "until it does, so others take it for dead and interrupt its runs",
                    self.name,
                    silent,
                    extra={"worker": self.name},
                )
            self.loop_stuck = True
            return
        self.loop_stuck = False
        name, ids = self.name, self.run_ids
        if name is None:
            return  # not registered (yet, or again): nothing to beat for
        try:
            beat = in_database_thread(lambda: beat_worker(name, ids))
        except DatabaseError as exc:
            # The database is away: beat again next round. Others do not take this worker for
            # dead meanwhile (they cannot reach the database either, see `liveness`).
            self.outage.failed(exc, retry_in=float(settings.WORKER_HEARTBEAT_SECONDS))
            return
        self.outage.recovered()
        self.beats += 1
        try:
            self._loop.call_soon_threadsafe(self._deliver, name, beat)
        except RuntimeError:
            self._stopping.set()
