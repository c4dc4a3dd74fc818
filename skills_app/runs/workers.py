"""Channels workers that execute agent runs (RUN_EXECUTOR=worker).

`python manage.py runworker skillscope-runs` starts one. When it starts, it registers itself
(`liveness`: a `Worker` row) and then:

- beats every WORKER_HEARTBEAT_SECONDS, for itself and every run it executes, and learns from
  the same rows whether one of its runs was asked to stop; the beat has a thread and clock of its
  own (`heartbeat.Heart`), so a loop lagging under load does not make a live worker look dead;

and, several times a heartbeat, in a database thread of its own:

- sweeps: runs of workers that stopped beating are marked interrupted (`recovery`);
- claims queued runs, oldest first, while it executes fewer than WORKER_MAX_RUNS (`queue`),
  at most its share of the work among the live workers, so the least busy worker goes first.

A `run.execute` message on the `skillscope-runs` channel only wakes it up to claim at once. Each
claimed run executes as a task, so one worker runs many at once. A stop from any web process
reaches a run through its worker's own channel (`run.stop`), or, failing that, the
`stop_requested` flag its heartbeat reads. A worker that stops on SIGTERM/SIGINT marks its
runs interrupted (Retry) and deregisters at once; one that dies is found by the others (and by
the web processes) within WORKER_STALE_SECONDS.

Neither service going away ends a worker or its runs. While Redis is away the channel layer
waits it out (`webapp.redis_layer`): no wake-ups or stops arrive by channel (the queue and the
stop flag are read from the database anyway) and live frames are dropped, while the runs go on
streaming into the database, from where the tabs catch up. While the database is away the runs
go on too, their text waiting in memory (`streams`), the heartbeat and the loop retry, and
nobody takes the worker for dead (`liveness`). Each outage is logged once when it starts and
once when it ends (`core.outages`).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from typing import Any

from asgiref.server import StatelessServer
from channels.consumer import AsyncConsumer
from channels.db import aclose_old_connections
from channels.worker import Worker
from django.conf import settings
from django.db import DatabaseError

from skills_app.core.llm import load_sdk
from skills_app.core.logcontext import log_context
from skills_app.core.outages import Outage, RateLimited
from skills_app.database_thread import DatabaseThread
from skills_app.runs import heartbeat, jobs, liveness, queue, recovery, tasks, wiring
from skills_app.runs import supervisor as runs
from skills_app.runs.broadcast import broadcast_events

logger = logging.getLogger(__name__)

# The most runs claimed in one go when WORKER_MAX_RUNS is 0 (no cap): the next tick takes more.
CLAIM_BATCH = 100


class WorkerLoop:
    """One worker's registration, heartbeat, sweep and claims, and the runs it executes."""

    def __init__(self, channel: str) -> None:
        self.channel = channel
        self.name = liveness.new_worker_name()
        self.capacity = int(settings.WORKER_MAX_RUNS)
        self.runs: dict[int, asyncio.Task[Any]] = {}
        self.database = DatabaseThread("skillscope-worker")
        self._poke = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.ticks = 0  # rounds of the loop so far (tests wait on it)
        self._registered = False
        self.heart: heartbeat.Heart | None = None
        # The latest beat the heart handed over, applied by the loop in order with its other work.
        self._beat: liveness.Beat | None = None
        self.outage = Outage("the database", logger, who=f"worker {self.name}")
        self.failures = RateLimited(logger)

    def start(self) -> None:
        self.heart = heartbeat.Heart(asyncio.get_running_loop(), self._received)
        self.heart.start()
        self._task = asyncio.ensure_future(self._loop())

    def _received(self, name: str, beat: liveness.Beat) -> None:
        # On the loop, from the heart's thread. A beat for a former name, or one that was under
        # way while this worker gave up its runs, is stale: drop it.
        if self.heart is not None and name == self.heart.name == self.name and self._registered:
            self._beat = beat
            if not beat.alive:
                self.poke()

    def _publish_runs(self) -> None:
        # A fresh tuple each time: the heart's thread reads it, never this dict.
        if self.heart is not None:
            self.heart.run_ids = tuple(self.runs)

    def poke(self) -> None:
        """Look at the queue now (a wake-up arrived, or a run ended and made room)."""
        self._poke.set()

    async def _register(self) -> None:
        await self.database.run(liveness.register, self.name, self.channel, self.capacity)
        self._registered = True
        self.outage.who = f"worker {self.name}"
        if self.heart is not None:
            self.heart.name = self.name
        logger.info(
            "worker %s started (channel %s, at most %s runs at once)",
            self.name,
            self.channel,
            self.capacity or "unlimited",
            extra={"worker": self.name},
        )

    async def _loop(self) -> None:
        next_sweep = 0.0
        while True:
            try:
                # The runs' own database work shares one thread, and Django replaces broken
                # connections only between requests, which a worker serves none of: here that
                # thread's connection is tested before its next query and replaced if an error
                # or a database restart broke it (settings.py, DATABASES).
                await aclose_old_connections()
                if not self._registered:
                    # Until the database answers, this worker neither claims nor beats.
                    await self._register()
                beat, self._beat = self._beat, None
                if beat is not None:
                    await self._follow(beat)
                now = time.monotonic()
                if now >= next_sweep:
                    next_sweep = now + liveness.sweep_interval()
                    trusted = self.database.continuity.seconds()
                    events = await self.database.run(recovery.sweep, trusted)
                    await broadcast_events(events)
                await self.claim()
                # A trigger's test runs are queued the same way and claimed here too (handed to
                # runs as a worker duty: runs never import a feature).
                await wiring.claim_and_start(worker=self.name, database=self.database.run)
                self.outage.recovered()
            except DatabaseError as exc:
                # The database is away: the runs go on (their text waits in memory), and this
                # worker keeps them; one line now, one when it is back.
                self.outage.failed(exc, retry_in=liveness.sweep_interval())
            except Exception:
                self.failures.exception(
                    "loop", "worker %s: heartbeat, sweep or claim failed", self.name
                )
            try:
                # asyncio.timeout, not wait_for: in Python 3.11 a wait_for whose event is set as
                # the loop is cancelled (a run ending while the worker stops) swallows the
                # cancellation, and the stopping worker went round for good.
                async with asyncio.timeout(liveness.sweep_interval()):
                    await self._poke.wait()
            except TimeoutError:
                pass
            self._poke.clear()
            self.ticks += 1

    async def _follow(self, beat: liveness.Beat) -> None:
        """Act on what the heart learned: stop flags, or that others took this worker for dead."""
        if not beat.alive:
            await self._taken_for_dead()
            return
        for run_id, (status, stop) in beat.runs.items():
            task = self.runs.get(run_id)
            if task is not None and not task.done():
                runs.follow(run_id, task, status, stop)

    async def _taken_for_dead(self) -> None:
        """Others marked this worker dead (it missed its heartbeats): give up its runs, start over."""
        logger.error(
            "worker %s was taken for dead (no heartbeat for %s s); its runs are interrupted and it "
            "starts over under a new name",
            self.name,
            settings.WORKER_STALE_SECONDS,
            extra={"worker": self.name},
        )
        assert self.heart is not None
        self.heart.name = None  # no beats for the buried name, none yet for the new one
        try:
            await self._give_up_runs()
        except Exception:
            self.heart.name = self.name  # the next beat says so again, and this is tried again
            raise
        self.name = liveness.new_worker_name()
        self._registered = False
        await self._register()

    async def _give_up_runs(self) -> None:
        """Mark every run of this worker interrupted (Retry), then drop what they still produce."""
        ids = [run_id for run_id, task in self.runs.items() if not task.done()]
        events = await self.database.run(recovery.interrupt_runs, ids)
        await broadcast_events(events)
        for run_id in ids:
            tasks.ABANDONED.add(run_id)
            self.runs[run_id].cancel()

    def _free(self) -> int:
        if not self.capacity:
            return CLAIM_BATCH
        return max(0, self.capacity - sum(1 for t in self.runs.values() if not t.done()))

    async def claim(self) -> None:
        free = self._free()
        if not free:
            return
        busy = sum(1 for t in self.runs.values() if not t.done())
        share = await self.database.run(queue.fair_share, busy)
        if not share:
            return
        claimed = await self.database.run(
            queue.claim, worker=self.name, channel=self.channel, limit=min(free, share)
        )
        for run in claimed:
            self._start(run)

    def _start(self, run: queue.Claimed) -> None:
        with log_context(run_id=run.run_id, conversation_id=run.conversation_id):
            logger.info(
                "worker %s claimed run %s after %.1f s in the queue",
                self.name,
                run.run_id,
                run.waited,
                extra={"worker": self.name, "queued_seconds": round(run.waited, 3)},
            )
        task = runs.spawn_run(
            run.run_id, user_id=run.user_id, auto_answer=run.auto_answer, heartbeat=False
        )
        self.runs[run.run_id] = task
        self._publish_runs()
        started = time.monotonic()

        def finished(task: asyncio.Task[Any]) -> None:
            self.runs.pop(run.run_id, None)
            self._publish_runs()
            self.poke()  # room for the next queued run
            failure = None if task.cancelled() else task.exception()
            with log_context(run_id=run.run_id, conversation_id=run.conversation_id):
                logger.info(
                    "worker %s finished run %s after %.1f s%s",
                    self.name,
                    run.run_id,
                    time.monotonic() - started,
                    " (cancelled)" if task.cancelled() else "",
                    exc_info=failure,
                    extra={"worker": self.name},
                )

        task.add_done_callback(finished)

    async def stop(self, reason: str = "shut down") -> None:
        """End the loop, interrupt the runs still executing here, and deregister."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self.heart is not None:
            # Before deregistering: no beat may follow the goodbye.
            await asyncio.to_thread(self.heart.stop)
        try:
            await self._give_up_runs()
            await wiring.give_up_here()
            await self.database.run(liveness.deregister, self.name, reason)
            logger.info("worker %s stopped (%s)", self.name, reason, extra={"worker": self.name})
        except Exception:
            logger.exception(
                "worker %s could not deregister; others will find it silent", self.name
            )
        finally:
            await self.database.close()


class RunConsumer(AsyncConsumer):
    """A worker's one consumer: wake-ups (`run.execute`) from the shared channel, stops
    (`run.stop`) on its own channel, and the worker's loop (`worker.start`)."""

    worker: WorkerLoop | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            if self.worker is not None:
                await self.worker.stop()

    async def dispatch(self, message: dict[str, Any]) -> None:
        # One bad message must not end this consumer: its channel and loop are the worker's.
        try:
            await super().dispatch(message)
        except Exception:
            logger.exception("worker ignored a message it could not handle: %r", message)

    def _ensure_loop(self) -> WorkerLoop:
        if self.worker is None:
            self.worker = WorkerLoop(self.channel_name)
            self.worker.start()
            owner = self.scope.get("skillscope.worker")
            if isinstance(owner, RunWorker):
                owner.loop = self.worker
        return self.worker

    async def worker_start(self, message: dict[str, Any]) -> None:
        self._ensure_loop()

    async def run_execute(self, message: dict[str, Any]) -> None:
        # Which run does not matter: the worker claims the oldest queued ones it has room for.
        self._ensure_loop().poke()

    async def run_stop(self, message: dict[str, Any]) -> None:
        try:
            run_id = int(message["run_id"])
        except (KeyError, TypeError, ValueError):
            logger.error("ignoring a malformed run.stop message: %r", message)
            return
        # execute_run records the stop; the web process waits for the row.
        tasks.cancel(jobs.RUNS, run_id)


class RunWorker(Worker):
    """Channels' worker, started with its loop running (it claims queued runs at once).

    `handle_signals`: the `runworker` command stops cleanly on SIGTERM/SIGINT (systemd's stop);
    tests run workers inside their own loop and leave signals alone.
    """

    handle_signals = False
    # The loop of this worker's consumer, once started (for tests and introspection).
    loop: WorkerLoop | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._stopping = asyncio.Event()

    def stop(self) -> None:
        """Stop cleanly: the runs executing here are interrupted, the worker deregistered."""
        self._stopping.set()

    def _inbox(self, channel: str, scope: dict[str, Any]) -> asyncio.Queue[dict[str, Any]]:
        """The queue of the consumer instance for `channel` (made on first use)."""
        # asgiref leaves StatelessServer's methods unannotated (untyped_calls_exclude).
        inbox: asyncio.Queue[dict[str, Any]] = StatelessServer.get_or_create_application_instance(
            self, channel, scope
        )
        return inbox

    async def handle(self) -> None:
        # The SDK is imported before the first run is claimed, off the loop: imported by the
        # first model call instead, it held the loop for 1.3 s (5 s on a loaded machine), long
        # enough for the heartbeat's bound to find this worker dead (as daphne's asgi.py does).
        await asyncio.to_thread(load_sdk)
        if queue.RUN_CHANNEL in self.channels:
            # Start the loop now, not with the first wake-up: queued runs may be waiting already.
            scope = {"type": "channel", "channel": queue.RUN_CHANNEL, "skillscope.worker": self}
            self._inbox(queue.RUN_CHANNEL, scope).put_nowait({"type": "worker.start"})
        listeners = [asyncio.ensure_future(self.listener(name)) for name in self.channels]
        if self.handle_signals:
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(signum, self.stop)
        waiting = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({*listeners, waiting}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiting.cancel()
            instances = [d["future"] for d in self.application_instances.values()]
            for future in [*listeners, *instances]:
                future.cancel()
            # Each consumer interrupts its runs and deregisters before the process ends.
            await asyncio.gather(*listeners, *instances, return_exceptions=True)
        for listener in listeners:
            error = None if listener.cancelled() else listener.exception()
            if error is not None:
                raise error  # not an outage (the layer waits those out): a bug


__all__ = ["RunConsumer", "RunWorker", "WorkerLoop"]
