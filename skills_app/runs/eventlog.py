"""A conversation's event log: every stored event with its per-conversation seq.

A browser resumes after the last seq it applied; a consumer fills gaps from here. Events are
appended one at a time (in the transaction of what they say changed) or, for the stream saver,
many at once.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import F

from skills_app.core.events import MessageStored, event_type
from skills_app.core.events import RunEvent as CoreEvent
from skills_app.models import Conversation, Message, RunEvent


def message_event(row: Message) -> dict[str, Any]:
    """The data of a `message.stored` event: which row was stored (the chat renders it)."""
    return MessageStored(
        message_id=row.pk,
        role=row.role,
        kind=row.kind,
        is_meta=row.is_meta,
        seq=row.seq,
        run_id=row.run_id,
    ).data()


def append_event(
    conversation_id: int,
    event: CoreEvent | str,
    data: dict[str, Any] | None = None,
    *,
    run_id: int | None = None,
    hidden: bool = False,
) -> RunEvent:
    """Append one event to the conversation's log, with the next seq.

    `event` is a typed event, or (for callers not converted yet) a dotted name plus its data;
    legacy names are stored under their current one (`message` as `message.stored`).
    """
    if isinstance(event, str):
        type_name, payload = event_type(event).type, dict(data or {})
    else:
        type_name, payload = event.type, event.data()
    with transaction.atomic():
        Conversation.objects.filter(pk=conversation_id).update(
            last_event_seq=F("last_event_seq") + 1
        )
        seq = Conversation.objects.values_list("last_event_seq", flat=True).get(pk=conversation_id)
        return RunEvent.objects.create(
            conversation_id=conversation_id,
            run_id=run_id,
            seq=seq,
            type=type_name,
            data=payload,
            hidden=hidden,
        )
