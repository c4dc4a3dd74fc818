"""Sending events to every subscriber of a conversation (the channel-layer group).

A group message's `type` is the event's own dotted name, so Channels hands it to the consumer's
handler of that name (`text.delta` -> `text_delta`). Stored events carry their `seq` and the
HTML they show, rendered once per visibility class by the renderer handed to runs
(`wiring.render`: `html` for ordinary users, None when they get nothing; `inspector_html` for
those who may inspect hidden content); live events carry only their data.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Iterator, Sequence
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from skills_app.core.events import EventDataError, event_from
from skills_app.core.events import RunEvent as CoreEvent
from skills_app.models import RunEvent
from skills_app.runs import wiring
from skills_app.runs.wiring import Fragments

logger = logging.getLogger(__name__)

GROUP_PREFIX = "conversation-"


def group_name(conversation_id: int) -> str:
    """The channel-layer group every subscriber of a conversation joins."""
    return f"{GROUP_PREFIX}{conversation_id}"


async def publish(
    conversation_id: int,
    seq: int,
    event: CoreEvent,
    *,
    hidden: bool = False,
    fragments: Fragments | None = None,
) -> None:
    """Announce a stored event (its seq, its data and its HTML) to the conversation's tabs."""
    layer = get_channel_layer()
    if layer is None:
        return
    message: dict[str, Any] = {
        "type": event.type,
        "seq": seq,
        "hidden": hidden,
        "event": event.data(),
        "html": None,
        "inspector_html": None,
    }
    if fragments is not None:
        message["html"] = None if hidden else fragments.public
        message["inspector_html"] = fragments.inspector
    collected = _COLLECTED.get()
    if collected is not None:
        collected.append((conversation_id, dict(message)))
    await layer.group_send(group_name(conversation_id), message)


Announced = tuple[int, dict[str, Any]]
# The stored events announced by the task that opened `collecting` (None: nobody collects).
_COLLECTED: contextvars.ContextVar[list[Announced] | None] = contextvars.ContextVar(
    "skillscope_announced", default=None
)


@contextlib.contextmanager
def collecting() -> Iterator[list[Announced]]:
    """The stored events this task announces meanwhile: (conversation id, group message).

    A websocket consumer collects those of an action its tab performed, to show them to that tab
    at once: through the channel layer they can arrive after the events of a worker that took the
    new run meanwhile, which would look like a gap to fill from the database.
    """
    collected: list[Announced] = []
    token = _COLLECTED.set(collected)
    try:
        yield collected
    finally:
        _COLLECTED.reset(token)


async def send_live(conversation_id: int, event: CoreEvent) -> None:
    """Send a live event (streamed text, a block starting) to the conversation's tabs."""
    layer = get_channel_layer()
    if layer is None:
        return
    await layer.group_send(group_name(conversation_id), {"type": event.type, "event": event.data()})


async def send_live_many(items: Sequence[tuple[int, CoreEvent]]) -> None:
    """Send live events of several conversations, (conversation id, event), in order."""
    for conversation_id, event in items:
        try:
            await send_live(conversation_id, event)
        except Exception:  # one tab's frame failing holds back no other
            logger.exception("sending live text to conversation %s failed", conversation_id)


# A stored event made ready to announce: its row, its typed event and its HTML.
Prepared = list[tuple[RunEvent, CoreEvent, Fragments | None]]


async def broadcast_events(events: list[RunEvent]) -> None:
    """Announce events stored outside a run's recorder (the user's message, a stop, recovery)."""
    await announce(await sync_to_async(prepare)(events))


async def announce(prepared: Prepared) -> None:
    """Send events made ready by `prepare` (no database: the caller's hop rendered them)."""
    for row, event, fragments in prepared:
        await publish(row.conversation_id, row.seq, event, hidden=row.hidden, fragments=fragments)


def prepare(events: list[RunEvent]) -> Prepared:
    """Type and render stored events for `announce` (in the database thread: rendering reads)."""
    found = []
    for row in events:
        try:
            event = event_from(row.type, row.data)
        except EventDataError:
            logger.exception("not announcing event %s #%s", row.type, row.seq)
            continue
        found.append((row, event, wiring.render(event, conversation_id=row.conversation_id)))
    return found
