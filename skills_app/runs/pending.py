"""Messages sent while a run is busy: queued on the server, sent one by one when runs end.

Nothing typed is lost. A message sent while the conversation has an active run (or while others
already wait, so the order holds) becomes a `QueuedMessage` row and a `message.queued` event;
every tab shows it as "queued" with a Cancel button, and a reload shows it again. When a run
ends, `send_next` starts a run with the oldest waiting message.

The queue and the run that drains it meet under the conversation's row lock: a message queued
while a run ends is either seen by that run's `send_next` or sees the run ended and starts its
own run, never neither. A conversation holds at most CHAT_MAX_QUEUED waiting messages.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from skills_app.core.events import MessageQueued, QueuedMessageGone
from skills_app.models import Conversation, QueuedMessage, Run, RunEvent
from skills_app.runs import eventlog
from skills_app.runs.broadcast import broadcast_events
from skills_app.runs.errors import RunError

logger = logging.getLogger(__name__)

# start_run's shape (passed in: the supervisor imports this module).
StartRun = Callable[..., Awaitable[Any]]


class QueueError(Exception):
    """A message cannot be queued or cancelled; the message says why."""


def queue_if_busy(conversation_id: int, user_id: int, text: str) -> list[RunEvent] | None:
    """Queue `text` when a run is active or others wait (the events); None: start a run now."""
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(pk=conversation_id)
        if conversation.deleted_at is not None:
            raise QueueError("This conversation was deleted; start a new one.")
        waiting = QueuedMessage.objects.filter(
            conversation_id=conversation_id, status=QueuedMessage.PENDING
        ).count()
        busy = conversation.runs.filter(status__in=Run.ACTIVE).exists()
        if not busy and not waiting:
            return None
        recent = QueuedMessage.objects.filter(
            author_id=user_id, created_at__gte=timezone.now() - timedelta(minutes=1)
        ).count()
        limit = settings.RATE_LIMIT_MESSAGES_PER_MINUTE
        if recent >= limit:
            # Queue and cancel in a loop would otherwise write events without end.
            raise QueueError(
                f"You have queued {recent} messages in the last minute (the limit is {limit}). "
                "Your text is still in the box: wait a moment, then send it."
            )
        if waiting >= settings.CHAT_MAX_QUEUED:
            raise QueueError(
                f"{waiting} messages are already waiting for this answer to end (the limit is "
                f"{settings.CHAT_MAX_QUEUED}). Your text is still in the box: send it when one "
                "has gone, or cancel one."
            )
        queued = QueuedMessage.objects.create(
            conversation_id=conversation_id, author_id=user_id, text=text
        )
        return [eventlog.append_event(conversation_id, MessageQueued(queued_id=queued.pk))]


def cancel(conversation_id: int, queued_id: int) -> list[RunEvent]:
    """Cancel a waiting message of this conversation (the events); QueueError when it is not one."""
    with transaction.atomic():
        # The conversation is part of the filter: an id from another conversation matches nothing.
        cancelled = QueuedMessage.objects.filter(
            pk=queued_id, conversation_id=conversation_id, status=QueuedMessage.PENDING
        ).update(status=QueuedMessage.CANCELLED, finished_at=timezone.now())
        if not cancelled:
            raise QueueError("That message is not waiting any more: it was sent or cancelled.")
        gone = QueuedMessageGone(queued_id=queued_id, status=QueuedMessage.CANCELLED)
        return [eventlog.append_event(conversation_id, gone)]


def pending(conversation_id: int) -> list[QueuedMessage]:
    """The messages waiting in a conversation, oldest first (the chat page shows them)."""
    return list(
        QueuedMessage.objects.filter(
            conversation_id=conversation_id, status=QueuedMessage.PENDING
        ).order_by("pk")
    )


def _take_next(conversation_id: int) -> tuple[QueuedMessage | None, list[RunEvent]]:
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(pk=conversation_id)
        if conversation.runs.filter(status__in=Run.ACTIVE).exists():
            return None, []  # that run's end sends it
        queued = (
            QueuedMessage.objects.filter(
                conversation_id=conversation_id, status=QueuedMessage.PENDING
            )
            .order_by("pk")
            .first()
        )
        if queued is None:
            return None, []
        queued.status, queued.finished_at = QueuedMessage.SENT, timezone.now()
        queued.save(update_fields=["status", "finished_at"])
        gone = QueuedMessageGone(queued_id=queued.pk, status=QueuedMessage.SENT)
        return queued, [eventlog.append_event(conversation_id, gone)]


def _failed(queued: QueuedMessage, error: str) -> list[RunEvent]:
    QueuedMessage.objects.filter(pk=queued.pk).update(status=QueuedMessage.FAILED, error=error)
    gone = QueuedMessageGone(queued_id=queued.pk, status=QueuedMessage.FAILED, error=error)
    return [eventlog.append_event(queued.conversation_id, gone)]


def _requeue(queued: QueuedMessage) -> list[RunEvent]:
    QueuedMessage.objects.filter(pk=queued.pk).update(
        status=QueuedMessage.PENDING, finished_at=None
    )
    return [eventlog.append_event(queued.conversation_id, MessageQueued(queued_id=queued.pk))]


async def send_next(conversation_id: int, *, start: StartRun) -> None:
    """Start a run with the oldest waiting message, if no run is active; the next run's end goes on.

    The run is started within its author's limits: when they may not send now, the message is
    marked failed with that reason, in every tab, rather than sent past the limits.
    """
    # One drain at a time per conversation in this process, so two ends of the same run (its
    # task and a stop) cannot start two queued messages out of order.
    async with _DRAINING.setdefault(conversation_id, asyncio.Lock()):
        await _send_next(conversation_id, start=start)
    if not _DRAINING[conversation_id].locked():
        _DRAINING.pop(conversation_id, None)


_DRAINING: dict[int, asyncio.Lock] = {}


async def _send_next(conversation_id: int, *, start: StartRun) -> None:
    queued, events = await sync_to_async(_take_next)(conversation_id)
    await broadcast_events(events)
    if queued is None:
        return
    try:
        # The limits are checked where the run is created, in one step with it.
        await start(conversation_id, queued.text, user_id=queued.author_id, within_limits=1)
    except Exception as exc:
        busy = await Run.objects.filter(
            conversation_id=conversation_id, status__in=Run.ACTIVE
        ).aexists()
        if busy:
            # A run started between the take and the start: the message waits for that one.
            await broadcast_events(await sync_to_async(_requeue)(queued))
            return
        await broadcast_events(await sync_to_async(_failed)(queued, _reason(queued, exc)))


def _reason(queued: QueuedMessage, exc: Exception) -> str:
    """Why a queued message was not sent, as every tab shows it: a refusal in its own words;
    anything else only in the log (its text may name server paths, hosts or queries)."""
    if isinstance(exc, RunError):  # the chat's sending limits too
        logger.info("queued message %s could not be sent: %s", queued.pk, exc)
        return str(exc)[:500]
    logger.error("queued message %s could not be sent", queued.pk, exc_info=exc)
    return "The server could not send it (an internal error). Copy it and send it again."
