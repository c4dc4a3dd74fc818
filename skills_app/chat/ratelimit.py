"""Per-user limits on sending: messages per minute and runs active at once.

Counted from the database (runs started by the user's conversations), so the limits hold across
tabs and across several web processes without a shared cache.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from skills_app.models import Run
from skills_app.runs.errors import RunError

WINDOW = timedelta(minutes=1)


class RateLimitError(RunError):
    """The user hit a sending limit; the message says which and when to try again.

    A RunError: a run cannot start, and whoever starts runs shows the reason as it is.
    """


def check_send(user_id: int) -> None:
    """Raise RateLimitError when the user may not start another run right now."""
    runs = Run.objects.filter(conversation__owner_id=user_id)
    per_minute = settings.RATE_LIMIT_MESSAGES_PER_MINUTE
    recent = runs.filter(started_at__gte=timezone.now() - WINDOW).count()
    if recent >= per_minute:
        raise RateLimitError(
            f"You have sent {recent} messages in the last minute (the limit is {per_minute}). "
            "Wait a moment, then press Retry."
        )
    concurrent = settings.RATE_LIMIT_CONCURRENT_RUNS
    active = runs.filter(status__in=Run.ACTIVE).count()
    if active >= concurrent:
        raise RateLimitError(
            f"You already have {active} answers in progress (the limit is {concurrent}). "
            "Wait for one to finish or stop it, then press Retry."
        )
