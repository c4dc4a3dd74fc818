"""Per-user limits on starting model calls: messages per minute, runs active at once, and the
spending limits. Every entrance that starts runs calls `check_send`: the chat box, retry, edit,
regenerate, queued messages, summaries, the comparison page (three runs at once).

Counted from the database (runs started by the user's conversations), so the limits hold across
tabs and across several web processes without a shared cache. The budget check here is the
early word; the reservation before every model call (`policy.budgets`) is what holds.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from skills_app.models import Run
from skills_app.policy import budgets
from skills_app.policy.access import policy_for
from skills_app.policy.barred import account_barred
from skills_app.runs.errors import RunError

WINDOW = timedelta(minutes=1)


class RateLimitError(RunError):
    """The user hit a sending limit; the message says which and when to try again.

    A RunError: a run cannot start, and whoever starts runs shows the reason as it is.
    """


def check_send(user_id: int, *, runs_wanted: int = 1) -> None:
    """Raise RateLimitError when the user may not start `runs_wanted` more runs right now."""
    barred = account_barred(user_id)
    if barred:
        # A session opened before a lockout or a deactivation starts nothing more.
        raise RateLimitError(barred)
    runs = Run.objects.filter(conversation__owner_id=user_id)
    per_minute = settings.RATE_LIMIT_MESSAGES_PER_MINUTE
    recent = runs.filter(started_at__gte=timezone.now() - WINDOW).count()
    if recent + runs_wanted > per_minute:
        raise RateLimitError(
            f"You have sent {recent} messages in the last minute (the limit is {per_minute}). "
            "Wait a moment, then press Retry."
        )
    concurrent = settings.RATE_LIMIT_CONCURRENT_RUNS
    active = runs.filter(status__in=Run.ACTIVE).count()
    if active + runs_wanted > concurrent:
        raise RateLimitError(
            f"You already have {active} answers in progress (the limit is {concurrent}). "
            "Wait for one to finish or stop it, then press Retry."
        )
    try:
        budgets.check_room(policy_for(user_id))
    except budgets.BudgetExceeded as exc:
        raise RateLimitError(exc.message) from None
