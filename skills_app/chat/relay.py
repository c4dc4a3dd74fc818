"""Stored events rendered at the edge: for one viewer's visibility class, once per process.

Runs announce a stored event as data (`runs.broadcast`: seq, type, data and whether it is
hidden). Each tab's consumer asks here for its own viewer's frame: the event's seq, type,
announced fields (`event_views`) and fragment. The chat has two visibility classes: VISIBLE, the
viewers who may not inspect hidden content, and HIDDEN, those who may (`viewer_class`). A hidden
event is nothing for the VISIBLE class: it is never rendered for it, and an announcement that does
not say `"hidden": false` counts as hidden. An event type that shows nothing (`event_views`)
needs no database. The rest is rendered once per (conversation, seq, visibility class) in this
process and kept for the next tabs: a hundred tabs of one conversation wait on one render, not a
hundred.

A tab relays its messages one at a time, so the live text behind a stored event waits for that
event's render; renders therefore do not queue behind the runs' own database work (the one
thread every `sync_to_async` call of the process shares: runs set up, store, check limits,
take locks). A render that reads rows runs on this loop's render thread, with a database
connection of its own (`database_thread.DatabaseThread`); markup made from the event alone
(`event_views.reads_rows` false: the Stop button, a title) is rendered in the loop, no hop.
"""

from __future__ import annotations

import asyncio
import functools
import weakref
from collections import OrderedDict
from typing import Any

from django.db import DatabaseError

from skills_app.chat import fragments, frames
from skills_app.chat.event_views import announced, has_view, reads_rows
from skills_app.core.events import EVENT_TYPES
from skills_app.core.events import RunEvent as CoreEvent
from skills_app.database_thread import DatabaseThread

# Stored events whose fragments a process keeps (both classes of one event count twice).
CACHE_SIZE = 1_024

# The visibility classes: what viewers without the inspect permission may see, and what viewers
# with it may see (hidden content too).
VISIBLE, HIDDEN = "visible", "hidden"

# (conversation id, seq, event type, visibility class)
Key = tuple[int, int, str, str]


def viewer_class(*, can_inspect: bool) -> str:
    """The visibility class a viewer's frames are rendered for."""
    return HIDDEN if can_inspect else VISIBLE


def may_see(message: dict[str, Any], *, can_inspect: bool) -> bool:
    """Whether an announced stored event may reach a viewer (not hidden unless it says so)."""
    return viewer_class(can_inspect=can_inspect) == HIDDEN or message.get("hidden") is False


class RenderCache:
    """Fragments of recent stored events per visibility class, and the renders under way.

    Belongs to one event loop: a render is a task of that loop, which every tab asking for the
    same key awaits (shielded: a tab that closes meanwhile cancels nobody else's wait).
    """

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self.renders = 0  # renders started (the tests count them)
        self._fragments: OrderedDict[Key, asyncio.Task[str | None]] = OrderedDict()
        # Markdown already rendered for an event, shared by its two classes' renders.
        self._memos: OrderedDict[tuple[int, int], dict[str, str]] = OrderedDict()
        self._database: DatabaseThread | None = None

    async def fragment(
        self, conversation_id: int, seq: int, event: CoreEvent, *, can_inspect: bool
    ) -> str | None:
        key = (conversation_id, seq, event.type, viewer_class(can_inspect=can_inspect))
        task = self._fragments.get(key)
        if task is None:
            task = asyncio.ensure_future(self._render(conversation_id, seq, event, can_inspect))
            task.add_done_callback(lambda done: self._forget_failed(key, done))
            self._fragments[key] = task
            self.renders += 1
            _trim(self._fragments, self.size)
        else:
            self._fragments.move_to_end(key)
        return await asyncio.shield(task)

    async def _render(
        self, conversation_id: int, seq: int, event: CoreEvent, can_inspect: bool
    ) -> str | None:
        memo = self._memos.setdefault((conversation_id, seq), {})
        _trim(self._memos, self.size)
        if not reads_rows(event):
            return fragments.fragment_for(
                event, conversation_id=conversation_id, can_inspect=can_inspect, memo=memo
            )
        if self._database is None:
            self._database = DatabaseThread("skillscope-render")
        render = functools.partial(
            self._database.run,
            fragments.fragment_for,
            event,
            conversation_id=conversation_id,
            can_inspect=can_inspect,
            memo=memo,
        )
        try:
            html: str | None = await render()
        except DatabaseError:
            # This thread's connection may have sat idle through a database restart, which it
            # learns only at its next query (and closes it then): a render only reads, so it is
            # tried once more, on a new connection, before the tab is left to fill a gap.
            html = await render()
        return html

    def _forget_failed(self, key: Key, task: asyncio.Task[str | None]) -> None:
        # A failed render is not kept: the next tab tries again (and the error is read here, so
        # a render nobody awaits any more is not reported as never retrieved).
        failed = task.cancelled() or task.exception() is not None
        if failed and self._fragments.get(key) is task:
            del self._fragments[key]


def _trim(entries: OrderedDict[Any, Any], size: int) -> None:
    while len(entries) > size:
        entries.popitem(last=False)


_caches: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, RenderCache] = (
    weakref.WeakKeyDictionary()
)


def cache() -> RenderCache:
    """This event loop's cache (one per process under daphne; one per test loop in the tests)."""
    loop = asyncio.get_running_loop()
    found = _caches.get(loop)
    if found is None:
        found = _caches[loop] = RenderCache()
    return found


async def frame(conversation_id: int, message: dict[str, Any], *, can_inspect: bool) -> str | None:
    """The viewer's frame of a stored event announced to the group (None: nothing for them)."""
    event = _shown(message, can_inspect=can_inspect)
    if event is None:
        return None
    seq = int(message["seq"])
    html = await cache().fragment(conversation_id, seq, event, can_inspect=can_inspect)
    return frames.stored(seq, event.type, announced(event), html) if html else None


def _shown(message: dict[str, Any], *, can_inspect: bool) -> CoreEvent | None:
    """The announced event, if it shows anything to this viewer's class."""
    if not may_see(message, can_inspect=can_inspect):
        return None
    event_class = EVENT_TYPES.get(str(message.get("type", "")))
    if event_class is None or not has_view(event_class):
        return None
    return event_class.from_data(message["event"])
