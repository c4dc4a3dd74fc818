"""The limits on starting work for a person, in one place: a barred account (`barred`), how often
they may start runs and how many may be active at once, and the room left in their budgets.

A run's limits are checked once, in the transaction that creates it (`runs.supervisor`), after
`hold` has locked the person's row: parallel starts (other tabs, other processes) then wait for
each other and cannot all pass on the same count. A model call outside a run (a summary) asks
`check_send` once before it. (SQLite's IMMEDIATE transactions serialise anyway.) Counted from the
database, so the limits hold across tabs and web processes without a shared cache. The budget
check here is the early word; the reservation before every model call (`budgets`) is what holds.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone

from skills_app.models import Run, TriggerRun
from skills_app.policy import budgets
from skills_app.policy.access import policy_for
from skills_app.policy.barred import account_barred


class LimitReached(Exception):
    """The person may not start this now; the message says which limit and what to do."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def hold(user_id: int) -> None:
    """Lock the person's row until the transaction ends (call inside one, before checking)."""
    get_user_model().objects.select_for_update().filter(pk=user_id).first()


def _check_barred(user_id: int) -> None:
    barred = account_barred(user_id)
    if barred:
        # A session opened before a lockout or a deactivation starts nothing more.
        raise LimitReached(barred)


def check_send(user_id: int, *, runs_wanted: int = 1) -> None:
    """LimitReached when the person may not start `runs_wanted` more runs (or model calls) now:
    messages per minute, answers active at once, a budget reached."""
    _check_barred(user_id)
    runs = Run.objects.filter(conversation__owner_id=user_id)
    per_minute = settings.RATE_LIMIT_MESSAGES_PER_MINUTE
    recent = runs.filter(started_at__gte=timezone.now() - timedelta(minutes=1)).count()
    if recent + runs_wanted > per_minute:
        raise LimitReached(
            f"You have sent {recent} messages in the last minute (the limit is {per_minute}). "
            "Wait a moment, then press Retry."
        )
    concurrent = settings.RATE_LIMIT_CONCURRENT_RUNS
    active = runs.filter(status__in=Run.ACTIVE).count()
    if active + runs_wanted > concurrent:
        raise LimitReached(
            f"You already have {active} answers in progress (the limit is {concurrent}). "
            "Wait for one to finish or stop it, then press Retry."
        )
    try:
        budgets.check_room(policy_for(user_id))
    except budgets.BudgetExceeded as exc:
        raise LimitReached(exc.message) from None


def check_trigger_run(user_id: int, *, estimated_cost: Decimal | None) -> None:
    """LimitReached when the person may not start a trigger run now: runs per hour, and its
    estimated cost (None: free, the demo model) within what is left of every budget."""
    _check_barred(user_id)
    limit = settings.RATE_LIMIT_TRIGGER_RUNS_PER_HOUR
    recent = TriggerRun.objects.filter(
        started_by_id=user_id, created_at__gte=timezone.now() - timedelta(hours=1)
    ).count()
    if recent >= limit:
        raise LimitReached(
            f"You started {recent} trigger runs in the last hour (the limit is {limit}). Wait, "
            "or run fewer repetitions of the queries that matter."
        )
    if estimated_cost is None:
        return
    try:
        budgets.check_room(policy_for(user_id), estimated_cost)
    except budgets.BudgetExceeded as exc:
        raise LimitReached(
            f"This run is estimated at {budgets.usd(estimated_cost)} of prompts alone. "
            + exc.message
            + " Lower the repetitions or the number of queries."
        ) from None
