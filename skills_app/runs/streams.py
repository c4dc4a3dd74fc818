"""Streamed text on its way out of a run: committed to the database, then sent to the tabs.

A text delta does not wait for the database one by one, and no tab is ever sent text the
database lacks. The deltas of a run are coalesced (one frame per ~40 ms, each at most
LIVE_FRAME_CHARS characters, naming its block and character offset) and handed to the process's
`Journal`, which commits the frames of every streaming run in one transaction (`StreamPiece` rows)
and only then sends them to each conversation's group (while one batch is being sent, the next
is committed). So a worker killed with `kill -9`, or a
run taken for dead, keeps at least all the text any tab showed (the partial answer is read from
those rows), and a tab that connects mid-answer, or finds a hole where the channel layer dropped
a frame, reads the text from there and never shows less than it did.

The pace: a token bucket per run lets a frame go every LIVE_INTERVAL on average (LIVE_BURST at
once); what arrives meanwhile rides with the next frame. The interval is 40 ms, not 50: a pace
that equals the model's (20 deltas per second is one per 50 ms) has no slack, so one late delta
would delay every delta after it by as much. While the event loop lags, the interval grows (to at
most 250 ms): more streams than a process can relay at full pace get fewer, bigger frames instead
of an ever longer queue. A run has at most one batch of frames in the journal at a time, so while
a commit is under way (or the database is away) its text gathers into the next, bigger frame.

Storing a finished answer (its markdown, its check for quoted hidden text) is work the live text
must not wait behind, and many answers can end in the same second: while other runs of the
process are streaming and the process is busy, it waits its turn (`Journal.yielding`), at most
FINISH_WAIT; the tab already shows the whole answer as text meanwhile.

While the database is away the frames wait (the answer goes on arriving from the model and is
kept in memory) and the journal retries with backoff, logging the outage once; when it is back
the text goes out in one go. Rows of runs that ended are deleted now and then (a stored message
holds their text).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from asyncio import FIRST_COMPLETED
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError

from skills_app import textlog
from skills_app.core.events import TextDelta, ThinkingDelta
from skills_app.core.outages import Backoff, Outage
from skills_app.database_thread import DatabaseThread
from skills_app.runs import broadcast, tasks
from skills_app.textlog import LIVE_FRAME_CHARS

logger = logging.getLogger(__name__)

# At most 25 live frames per second per run on average, two at once: text stays fluid, and a
# busy stream costs its tabs one frame per ~40-50 ms however fast the model writes.
LIVE_INTERVAL = 0.04
LIVE_BURST = 2.0
# While the event loop lags (more streams than the process can relay at full pace: a frame to
# every tab is most of what a stream costs it), frames get rarer, down to one per
# LIVE_MAX_INTERVAL, and fewer, bigger frames let it catch up; back to full pace when it does.
LIVE_MAX_INTERVAL = 0.25
PROBE_SECONDS = 0.1
# Lag averaged over about a second: one pause (a garbage collection, a burst of runs starting)
# is not a loop that cannot keep up, and slowing every stream for it only adds to its delay.
LAG_WEIGHT = 0.2
LAG_HIGH, LAG_LOW = 0.05, 0.015
# Rows of ended runs are deleted this often (their stored messages hold the text).
PRUNE_SECONDS = 60.0
# Work that can wait for the live text (`Journal.yielding`) waits while the process used more
# than BUSY_SHARE of a core over the last BUSY_PROBE seconds, and at most FINISH_WAIT seconds.
BUSY_SHARE = 0.5
BUSY_PROBE = 0.05
FINISH_WAIT = 2.0

DELTAS: dict[str, type[TextDelta] | type[ThinkingDelta]] = {
    "text": TextDelta,
    "thinking": ThinkingDelta,
}


@dataclass(slots=True)
class Stream:
    """One streamed block: how much of it was handed to the journal, and what was not yet."""

    kind: str  # text | thinking
    call: int
    index: int
    sent: int = 0
    unsent: list[str] = field(default_factory=list)


class RunStreams:
    """The open streams of one run, with the live coalescing and the hand-over to the journal."""

    def __init__(self, conversation_id: int, run_id: int) -> None:
        self.conversation_id = conversation_id
        self.run_id = run_id
        self._streams: dict[tuple[int, int], Stream] = {}
        self._tokens = LIVE_BURST
        self._refilled = time.monotonic()
        # At most one batch of frames on its way per run, handed over by this task: the run
        # never waits for the database or the channel layer, and what arrives meanwhile rides
        # with the next frame.
        self._sender: asyncio.Task[None] | None = None
        # Frames go out in order when the sender and an explicit flush meet.
        self._lock = asyncio.Lock()

    def __bool__(self) -> bool:
        return bool(self._streams)

    async def add(self, kind: str, call: int, index: int, text: str) -> None:
        """Take one delta: the sender hands it over when the pace allows, with what else waits."""
        if not text:
            return
        stream = self._streams.get((call, index))
        if stream is None:
            stream = self._streams[(call, index)] = Stream(kind=kind, call=call, index=index)
            journal().watch(self)
        stream.unsent.append(text)
        if self._sender is None:
            self._sender = asyncio.ensure_future(self._send_while_unsent())
            self._sender.add_done_callback(_log_failure)

    async def _send_while_unsent(self) -> None:
        try:
            while any(stream.unsent for stream in self._streams.values()):
                wait = self._wait_for_token()
                if wait > 0:
                    await asyncio.sleep(wait)
                    continue
                self._tokens -= 1
                await self._send_unsent()
        finally:
            self._sender = None

    def _wait_for_token(self) -> float:
        now, interval = time.monotonic(), journal().interval
        self._tokens = min(LIVE_BURST, self._tokens + (now - self._refilled) / interval)
        self._refilled = now
        return 0.0 if self._tokens >= 1 else (1 - self._tokens) * interval

    async def flush_live(self) -> None:
        """Commit every unsent piece of text and send it to the conversation's group now."""
        await self._send_unsent()

    async def _send_unsent(self) -> None:
        async with self._lock:
            frames = list(self._take_unsent())
            if frames and self.run_id not in tasks.ABANDONED:
                await journal().write(self, frames)

    def _take_unsent(self) -> Iterator[TextDelta | ThinkingDelta]:
        for stream in self._streams.values():
            if not stream.unsent:
                continue
            text, stream.unsent = "".join(stream.unsent), []
            cls = DELTAS[stream.kind]
            for start in range(0, len(text), LIVE_FRAME_CHARS):
                yield cls(
                    index=stream.index,
                    text=text[start : start + LIVE_FRAME_CHARS],
                    run_id=self.run_id,
                    call=stream.call,
                    offset=stream.sent + start,
                )
            stream.sent += len(text)

    def close(self) -> None:
        """The streams ended in a stored row (or the run ended): nothing more to send."""
        self._streams.clear()
        journal().forget(self)


def _pieces(frames: list[TextDelta | ThinkingDelta]) -> list[textlog.Piece]:
    return [
        textlog.Piece(
            frame.run_id,
            frame.call,
            frame.index,
            "text" if isinstance(frame, TextDelta) else "thinking",
            frame.offset,
            frame.text,
        )
        for frame in frames
    ]


# Frames of one run handed to the journal, and the future its run waits on until they are sent.
Pending = tuple[RunStreams, list[TextDelta | ThinkingDelta], asyncio.Future[None]]


class Journal:
    """Commits the frames of every streaming run of this process, then sends them; sets the pace
    of live frames from how late the event loop wakes it."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.interval = LIVE_INTERVAL
        self.lag = 0.0
        self._watched: dict[int, RunStreams] = {}
        self._pending: list[Pending] = []
        self._writer: asyncio.Task[None] | None = None
        self._arrived: asyncio.Future[None] | None = None  # the writer waits for frames on it
        self._probe: asyncio.Task[None] | None = None
        self._database: DatabaseThread | None = None
        self._pruned = time.monotonic()
        self.outage = Outage("the database", logger, who="live text")
        self.commits = 0  # statements written so far (tests, benchmarks)
        self._yielding = asyncio.Lock()

    def watch(self, streams: RunStreams) -> None:
        self._watched[id(streams)] = streams
        if self._probe is None or self._probe.done():
            self._probe = self.loop.create_task(self._pace_while_watched())

    def forget(self, streams: RunStreams) -> None:
        self._watched.pop(id(streams), None)

    @contextlib.asynccontextmanager
    async def yielding(self) -> AsyncIterator[None]:
        """For work that can wait for the live text (storing a finished answer): while runs of
        this process are streaming and the process is busy, such work goes one at a time, each
        once the process is less busy or FINISH_WAIT seconds later at the latest.

        A cancellation (the user's Stop) while it waits ends the wait, not the work: the work
        goes at once and the cancellation is raised after it (a finished answer's row is what
        its tab shows; without it the stop would keep less than was shown). Work done while its
        task is being cancelled already (a Stop's partial answer and note, a shutdown) does not
        wait at all."""
        task = asyncio.current_task()
        if not self._watched or (task is not None and task.cancelling()):
            yield
            return
        deadline = self.loop.time() + FINISH_WAIT
        stopped: asyncio.CancelledError | None = None
        turn = False
        try:
            await self._yielding.acquire()
            turn = True
            while self._watched and self.loop.time() < deadline and await self.busy():
                pass
        except asyncio.CancelledError as exc:
            stopped = exc
        try:
            yield
        except Exception as exc:
            if stopped is not None:
                raise stopped from exc  # the work failed, but the run must still stop
            raise
        finally:
            if turn:
                self._yielding.release()
        if stopped is not None:
            raise stopped

    async def busy(self) -> bool:
        """True when this process uses more than BUSY_SHARE of a core (every thread's CPU time,
        measured over the next BUSY_PROBE seconds)."""
        started, cpu = self.loop.time(), time.process_time()
        await asyncio.sleep(BUSY_PROBE)
        return (time.process_time() - cpu) / (self.loop.time() - started) > BUSY_SHARE

    def idle(self) -> bool:
        """True when no stream is watched and nothing is being written or sent."""
        probing = self._probe is not None and not self._probe.done()
        writing = self._writer is not None and not self._writer.done()
        return not probing and not writing and not self._pending

    async def write(self, streams: RunStreams, frames: list[TextDelta | ThinkingDelta]) -> None:
        """Commit these frames (with every other run's waiting now), then send them in order."""
        done: asyncio.Future[None] = self.loop.create_future()
        self._pending.append((streams, frames, done))
        if self._arrived is not None and not self._arrived.done():
            self._arrived.set_result(None)
        if self._writer is None or self._writer.done():
            self._writer = self.loop.create_task(self._write_while_pending())
        await asyncio.shield(done)  # a cancelled run still gets its last frames out

    async def _write_while_pending(self) -> None:
        # Two batches at a time: while one batch's frames go out to the channel layer, the next
        # one (other runs': a run has one batch on its way at a time) is committed. Each batch
        # is still sent only after its own commit.
        sending: asyncio.Task[None] | None = None
        committed: list[Pending] | None = None  # committed, waiting for the batch before it
        try:
            while self._pending or sending is not None:
                if not self._pending:
                    assert sending is not None
                    # Until the batch is out or more frames arrive, whichever is first.
                    self._arrived = self.loop.create_future()
                    await asyncio.wait((sending, self._arrived), return_when=FIRST_COMPLETED)
                    self._arrived = None
                    if sending.done():
                        sending = None
                    continue
                batch, self._pending = self._pending, []
                try:
                    await self._commit([frame for _, frames, _ in batch for frame in frames])
                except Exception as exc:
                    # Not an outage (those are retried): a bug. The runs' senders log it.
                    for _, _, done in batch:
                        if not done.done():
                            done.set_exception(exc)
                    continue
                committed = batch
                if sending is not None:
                    # Batches go out in the order they were committed. Shielded: cancelling a
                    # task cancels what it awaits, and that send's runs wait for it.
                    await asyncio.shield(sending)
                sending, committed = self.loop.create_task(self._send_batch(batch)), None
                if time.monotonic() - self._pruned > PRUNE_SECONDS:
                    self._pruned = time.monotonic()
                    await self._prune()
        finally:
            # A cancelled writer still lets out, in order, what it committed (their runs wait
            # for it), and leaves the frames handed over meanwhile to a writer that is not
            # leaving: `write` starts none while this one is not done.
            if sending is not None:
                await asyncio.shield(sending)
            if committed is not None:
                await asyncio.shield(self.loop.create_task(self._send_batch(committed)))
            if self._pending and self._writer is asyncio.current_task():
                self._writer = self.loop.create_task(self._write_while_pending())

    async def _send_batch(self, batch: list[Pending]) -> None:
        # Every frame of the batch, in order for each run. The frames are
        # committed: a send that fails (the layer drops what it cannot send while Redis is
        # away) leaves a hole the tabs fill from the database, not a failed run.
        items = [
            (streams.conversation_id, frame)
            for streams, frames, _ in batch
            if streams.run_id not in tasks.ABANDONED  # another process closed its history
            for frame in frames
        ]
        try:
            await broadcast.send_live_many(items)
        except Exception:
            logger.exception("sending live text failed; the tabs read it from the database")
        for _, _, done in batch:
            if not done.done():
                done.set_result(None)

    async def _commit(self, frames: list[TextDelta | ThinkingDelta]) -> None:
        """Write the pieces, retrying with backoff while the database is away."""
        if self._database is None:
            self._database = DatabaseThread("skillscope-journal")
        backoff = Backoff(first=0.1, cap=2.0)
        pieces = _pieces(frames)
        while True:
            try:
                await self._database.run(textlog.append_pieces, pieces)
            except DatabaseError as exc:
                wait = backoff.next()
                self.outage.failed(exc, retry_in=wait)
                if backoff.capped:
                    self.outage.capped(wait)
                await asyncio.sleep(wait)
                continue
            self.commits += 1
            self.outage.recovered()
            return

    async def _prune(self) -> None:
        assert self._database is not None
        try:
            await self._database.run(textlog.forget_pieces)
        except DatabaseError:
            logger.warning("deleting the streamed pieces of ended runs failed; next time")

    async def _pace_while_watched(self) -> None:
        while self._watched:
            asleep = self.loop.time()
            await asyncio.sleep(PROBE_SECONDS)
            self.pace(self.loop.time() - asleep - PROBE_SECONDS)
        self.interval, self.lag = LIVE_INTERVAL, 0.0

    def pace(self, lag: float) -> None:
        """Slow live frames down while the loop keeps running late, speed up when it does not."""
        self.lag += LAG_WEIGHT * (lag - self.lag)
        if self.lag > LAG_HIGH:
            self.interval = min(self.interval * 1.5, LIVE_MAX_INTERVAL)
        elif self.lag < LAG_LOW:
            self.interval = max(self.interval * 0.5, LIVE_INTERVAL)


_JOURNAL: Journal | None = None


def journal() -> Journal:
    """This event loop's journal (tests run a loop each; a server runs one)."""
    global _JOURNAL
    loop = asyncio.get_running_loop()
    if _JOURNAL is None or _JOURNAL.loop is not loop:
        _JOURNAL = Journal(loop)
    return _JOURNAL


def _log_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error("sending live text failed", exc_info=task.exception())


__all__ = ["Journal", "RunStreams", "journal"]
