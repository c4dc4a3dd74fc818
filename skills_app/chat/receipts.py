"""Each action a tab sends is taken once, whatever number of times the tab sends it.

chat.js gives every action a uuid (`action_id`) and sends it again after a reconnect until the
server acknowledges it: a frame written to a socket that was closing (the web process stopped)
may never have been read. The receipt is stored before the action is taken; a second frame with
the same id finds it and is only acknowledged.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from skills_app.models import ActionReceipt

# Longer than any tab waits to send an action again (it does so at its next connection).
KEEP = timedelta(days=1)
# One receipt in this many prunes the old ones: no timer, and the table stays small.
PRUNE_EVERY = 200


class ReceiptError(ValueError):
    """The action id is not one a tab makes."""


def action_id(value: Any) -> uuid.UUID | None:
    """The frame's `action_id` (None when it has none); ReceiptError when it is malformed."""
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > 36:
        raise ReceiptError('"action_id" must be a uuid.')
    try:
        return uuid.UUID(value)
    except ValueError:
        raise ReceiptError('"action_id" must be a uuid.') from None


def record(user_id: int, action: uuid.UUID, kind: str, conversation_id: int) -> bool:
    """Store the receipt of an action about to be taken; False if it was taken already."""
    try:
        with transaction.atomic():
            receipt = ActionReceipt.objects.create(
                user_id=user_id, action_id=action, kind=kind, conversation_id=conversation_id
            )
    except IntegrityError:
        return False
    if receipt.pk % PRUNE_EVERY == 0:
        prune()
    return True


def prune() -> int:
    """Forget receipts older than KEEP; how many went."""
    deleted, _ = ActionReceipt.objects.filter(created_at__lt=timezone.now() - KEEP).delete()
    return deleted
