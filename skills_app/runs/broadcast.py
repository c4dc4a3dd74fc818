"""Announcing a conversation's events to its tabs (the channel-layer group), as data.

A group message's `type` is the event's own dotted name, so Channels hands it to the consumer's
handler of that name. A stored event is announced as `{"type", "seq", "hidden", "event"}`
(its data and whether it is hidden content, never its HTML), once the transaction that stored it has
committed (`publish_on_commit`, as Zulip's `send_event_on_commit`); a live event as
`{"type", "event"}`. Whoever listens renders what its own viewer may see (the chat's consumer).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from channels.layers import get_channel_layer
from django.db import transaction

from skills_app.core.events import EventDataError, event_from
from skills_app.core.events import RunEvent as CoreEvent
from skills_app.models import RunEvent

logger = logging.getLogger(__name__)

GROUP_PREFIX = "conversation-"
# Conversations whose live frames are sent at the same time (`send_live_many`).
LANES = 8


def group_name(conversation_id: int) -> str:
    """The channel-layer group every subscriber of a conversation joins."""
    return f"{GROUP_PREFIX}{conversation_id}"


def envelope(seq: int, event: CoreEvent, *, hidden: bool) -> dict[str, Any]:
    """The group message of a stored event: its seq, type, data and whether it is hidden."""
    return {"type": event.type, "seq": seq, "hidden": hidden, "event": event.data()}


async def publish(
    conversation_id: int, seq: int, event: CoreEvent, *, hidden: bool = False
) -> None:
    """Announce a stored (and committed) event to the conversation's tabs."""
    await send([(conversation_id, envelope(seq, event, hidden=hidden))])


# Announcements waiting for their commit: (conversation id, group message).
Outbox = list[tuple[int, dict[str, Any]]]


def publish_on_commit(
    outbox: Outbox, conversation_id: int, seq: int, event: CoreEvent, *, hidden: bool
) -> None:
    """Put a stored event's announcement in `outbox` once the current transaction commits.

    A rollback drops it: no tab hears of an event the database does not have. The caller
    sends the outbox (`send`) after its database hop.
    """
    message = envelope(seq, event, hidden=hidden)
    transaction.on_commit(lambda: outbox.append((conversation_id, message)))


async def send(outbox: Outbox) -> None:
    """Send announcements whose transactions committed, in order."""
    layer = get_channel_layer()
    if layer is None:
        return
    for conversation_id, message in outbox:
        await layer.group_send(group_name(conversation_id), message)


async def send_live(conversation_id: int, event: CoreEvent) -> None:
    """Send a live event (streamed text, a block starting) to the conversation's tabs."""
    layer = get_channel_layer()
    if layer is None:
        return
    await layer.group_send(group_name(conversation_id), {"type": event.type, "event": event.data()})


async def send_live_many(items: Sequence[tuple[int, CoreEvent]]) -> None:
    """Send live events of several conversations, (conversation id, event): each conversation's
    in order, up to LANES conversations at a time.

    A send to Redis is a round trip, and a batch holds a frame of every streaming run of the
    process: one after the other, the batch takes as many round trips as it has frames, and a
    worker with many streams spends its time waiting for them. The lanes overlap those waits
    (the layer's connections, `CHANNEL_LAYERS`' hosts, each carry one at a time).
    """
    lanes: list[list[tuple[int, CoreEvent]]] = [[] for _ in range(LANES)]
    for conversation_id, event in items:
        lanes[conversation_id % LANES].append((conversation_id, event))
    busy = [lane for lane in lanes if lane]
    if len(busy) == 1:
        await _send_lane(busy[0])
    else:
        await asyncio.gather(*(_send_lane(lane) for lane in busy))


async def _send_lane(items: Sequence[tuple[int, CoreEvent]]) -> None:
    for conversation_id, event in items:
        try:
            await send_live(conversation_id, event)
        except Exception:  # one tab's frame failing holds back no other
            logger.exception("sending live text to conversation %s failed", conversation_id)


def typed(events: Sequence[RunEvent]) -> list[tuple[RunEvent, CoreEvent]]:
    """Stored events with their typed event; one this code cannot read is logged and left out."""
    found = []
    for row in events:
        try:
            found.append((row, event_from(row.type, row.data)))
        except EventDataError:
            logger.exception("not announcing event %s #%s", row.type, row.seq)
    return found


async def broadcast_events(events: Sequence[RunEvent]) -> None:
    """Announce committed events stored outside a run's recorder (the user's message, a stop)."""
    for row, event in typed(events):
        await publish(row.conversation_id, row.seq, event, hidden=row.hidden)
