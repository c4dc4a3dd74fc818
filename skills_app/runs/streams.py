"""Streamed text on its way out of a run: to the browser live, to the database in batches.

Live: the deltas of a run go to the conversation's group straight from the run, coalesced to
about one frame per 50 ms, each frame at most LIVE_FRAME_CHARS characters and naming its block
and character offset. The pace is a token bucket: a frame may go every LIVE_INTERVAL on average
(LIVE_BURST at once); a delta that finds a token goes at once, the others ride with the next
frame. The interval is 40 ms, not 50: a pace that equals the model's (20 deltas per second is
one per 50 ms) has no slack, so one late delta would delay every delta after it by as much.
While the event loop lags, the interval grows (to at most 250 ms): more streams than a process
can relay at full pace get fewer, bigger frames instead of an ever longer queue.

Stored: the text is written to the event log as `text.saved` / `thinking.saved` pieces by one
`StreamSaver` per process, which writes the unsaved text of every open stream in one transaction
every SAVE_INTERVAL, so database writes grow with how long answers stream (a few per second for
all of them together), never with their deltas. The saved pieces are what a tab that connects
mid-answer starts from, and what is kept of an answer whose process died. When the run stores its
message row the row holds the text, and what was not saved yet is dropped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async

from skills_app.core.events import RunEvent, TextDelta, TextSaved, ThinkingDelta, ThinkingSaved
from skills_app.runs import broadcast, tasks

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
# 16,000 characters are at most 64 KB of UTF-8 (+ JSON quoting of the odd quote or backslash):
# within the largest frame the consumer itself accepts.
LIVE_FRAME_CHARS = 16_000
# How often streamed text is written: the most a crash loses, and the longest a tab that
# connects mid-answer waits for the text between the last save and its first live delta.
SAVE_INTERVAL = 0.5

DELTAS: dict[str, type[TextDelta] | type[ThinkingDelta]] = {
    "text": TextDelta,
    "thinking": ThinkingDelta,
}
SAVED: dict[str, type[TextSaved] | type[ThinkingSaved]] = {
    "text": TextSaved,
    "thinking": ThinkingSaved,
}


@dataclass(slots=True)
class Stream:
    """One streamed block: how much of it went out live and was saved, and what did not yet."""

    kind: str  # text | thinking
    call: int
    index: int
    sent: int = 0
    saved: int = 0
    unsent: list[str] = field(default_factory=list)
    unsaved: list[str] = field(default_factory=list)


class RunStreams:
    """The open streams of one run, with the live coalescing and the hand-over to the saver."""

    def __init__(self, conversation_id: int, run_id: int) -> None:
        self.conversation_id = conversation_id
        self.run_id = run_id
        self._streams: dict[tuple[int, int], Stream] = {}
        self._tokens = LIVE_BURST
        self._refilled = time.monotonic()
        # At most one frame on its way per run, sent by this task: the run never waits for the
        # channel layer, and what arrives meanwhile rides with the next frame (a slow layer,
        # such as Redis under load, gets fewer and bigger frames rather than a longer queue).
        self._sender: asyncio.Task[None] | None = None
        # Frames go out in order when the sender and an explicit flush meet.
        self._lock = asyncio.Lock()

    def __bool__(self) -> bool:
        return bool(self._streams)

    async def add(self, kind: str, call: int, index: int, text: str) -> None:
        """Take one delta: the sender sends it when the pace allows, with what else is waiting."""
        if not text:
            return
        stream = self._streams.get((call, index))
        if stream is None:
            stream = self._streams[(call, index)] = Stream(kind=kind, call=call, index=index)
            saver().watch(self)
        stream.unsent.append(text)
        stream.unsaved.append(text)
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
        now, interval = time.monotonic(), saver().interval
        self._tokens = min(LIVE_BURST, self._tokens + (now - self._refilled) / interval)
        self._refilled = now
        return 0.0 if self._tokens >= 1 else (1 - self._tokens) * interval

    async def flush_live(self) -> None:
        """Send every unsent piece of text to the conversation's group now."""
        await self._send_unsent()

    async def _send_unsent(self) -> None:
        async with self._lock:
            for frame in list(self._take_unsent()):
                await broadcast.send_live(self.conversation_id, frame)

    def _take_unsent(self) -> Iterator[RunEvent]:
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

    def take_unsaved(self) -> list[RunEvent]:
        """The text not saved yet, as events to store (it counts as saved from now on)."""
        events: list[RunEvent] = []
        if self.run_id in tasks.ABANDONED:
            return events  # another process closed this run's history: it stores nothing more
        for stream in self._streams.values():
            if not stream.unsaved:
                continue
            text, stream.unsaved = "".join(stream.unsaved), []
            events.append(
                SAVED[stream.kind](
                    run_id=self.run_id,
                    call=stream.call,
                    index=stream.index,
                    offset=stream.saved,
                    text=text,
                )
            )
            stream.saved += len(text)
        return events

    def close(self) -> None:
        """The streams ended in a stored row (or the run ended): nothing more to save or send."""
        self._streams.clear()
        saver().forget(self)


class StreamSaver:
    """Saves the unsaved text of every open stream in this process, one transaction per tick,
    and sets the pace of live frames from how late the event loop wakes it."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.interval = LIVE_INTERVAL
        self.lag = 0.0
        self._watched: dict[int, RunStreams] = {}
        self._task: asyncio.Task[None] | None = None

    def watch(self, streams: RunStreams) -> None:
        self._watched[id(streams)] = streams
        if self._task is None or self._task.done():
            self._task = self.loop.create_task(self._run())

    def forget(self, streams: RunStreams) -> None:
        self._watched.pop(id(streams), None)

    def idle(self) -> bool:
        """True when no stream is watched and no save is under way."""
        return self._task is None or self._task.done()

    async def _run(self) -> None:
        saving: asyncio.Task[None] | None = None
        next_save = self.loop.time() + SAVE_INTERVAL
        while self._watched:
            asleep = self.loop.time()
            await asyncio.sleep(PROBE_SECONDS)
            self.pace(self.loop.time() - asleep - PROBE_SECONDS)
            # A save waits for the database thread; the probe goes on meanwhile.
            if self.loop.time() >= next_save and (saving is None or saving.done()):
                next_save = self.loop.time() + SAVE_INTERVAL
                saving = self.loop.create_task(self._save_logged())
        self.interval, self.lag = LIVE_INTERVAL, 0.0
        if saving is not None:
            await saving  # idle means idle: no save still writing when this task ends

    def pace(self, lag: float) -> None:
        """Slow live frames down while the loop keeps running late, speed up when it does not."""
        self.lag += LAG_WEIGHT * (lag - self.lag)
        if self.lag > LAG_HIGH:
            self.interval = min(self.interval * 1.5, LIVE_MAX_INTERVAL)
        elif self.lag < LAG_LOW:
            self.interval = max(self.interval * 0.5, LIVE_INTERVAL)

    async def _save_logged(self) -> None:
        try:
            await self.save_now()
        except Exception:
            # A database hiccup loses nothing: the text stays unsaved and the row stores it.
            logger.exception("saving streamed text failed; trying again next tick")

    async def save_now(self) -> None:
        """Write every watched stream's unsaved text now and announce each piece."""
        from skills_app.runs import eventlog

        items: list[tuple[int, int, RunEvent]] = []
        for streams in list(self._watched.values()):
            for event in streams.take_unsaved():
                items.append((streams.conversation_id, streams.run_id, event))
        if not items:
            return
        stored = await sync_to_async(eventlog.append_events)(items)
        for (conversation_id, _run_id, event), seq in zip(items, stored, strict=True):
            await broadcast.publish(conversation_id, seq, event)


_SAVER: StreamSaver | None = None


def saver() -> StreamSaver:
    """This event loop's saver (tests run a loop each; a server runs one)."""
    global _SAVER
    loop = asyncio.get_running_loop()
    if _SAVER is None or _SAVER.loop is not loop:
        _SAVER = StreamSaver(loop)
    return _SAVER


def _log_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error("sending live text failed", exc_info=task.exception())
