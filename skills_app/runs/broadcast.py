"""Sending stored events to every subscriber of a conversation (the channel-layer group)."""

from __future__ import annotations

import logging
from typing import Any

from channels.layers import get_channel_layer

from skills_app.models import RunEvent
from skills_app.runs import store

logger = logging.getLogger(__name__)


async def broadcast(
    conversation_id: int, seq: int, type: str, data: dict[str, Any], *, hidden: bool = False
) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    await layer.group_send(
        store.group_name(conversation_id),
        {"type": "run.event", "seq": seq, "event_type": type, "data": data, "hidden": hidden},
    )


async def broadcast_events(events: list[RunEvent]) -> None:
    """Send stored events to the subscribers of their conversations."""
    for event in events:
        await broadcast(
            event.conversation_id, event.seq, event.type, event.data, hidden=event.hidden
        )
