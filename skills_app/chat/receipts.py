"""Each action a tab sends is taken once, whatever number of times the tab sends it.

chat.js gives every action a uuid (`action_id`) and sends it again after a reconnect until the
server acknowledges it: a frame written to a socket that was closing (the web process stopped)
may never have been read. The receipt is stored before the action is taken; a second frame with
the same id finds it and is only acknowledged.

A user's receipts are capped per minute (PER_MINUTE, across tabs and web processes): a script
flooding its socket with fresh ids is refused in words past the cap instead of growing the table
by a row per frame until the day's prune. A person pressing buttons never comes near it.
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
# Actions one user may send a minute, all tabs together.
PER_MINUTE = 120


class ReceiptError(ValueError):
    """The action id is not one a tab makes, or the user sent too many actions this minute."""


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
    """Store the receipt of an action about to be taken; False if it was taken already.
    ReceiptError when the user sent PER_MINUTE actions in the last minute."""
    recent = ActionReceipt.objects.filter(
        user_id=user_id, created_at__gte=timezone.now() - timedelta(minutes=1)
    )
    if recent.count() >= PER_MINUTE and not recent.filter(action_id=action).exists():
        raise ReceiptError(
            f"Too many actions in a minute (the limit is {PER_MINUTE}): "
            "nothing was done; wait a moment, then try again."
        )
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
