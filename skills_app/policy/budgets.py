"""Spending limits in dollars, per user and per group, per day and per month.

Before every model call a reservation sets aside the most the call can cost
(`core.pricing.ceiling_usd`) on the counters of the person and of each of their groups that has a
policy. Each counter is changed by a conditional UPDATE ("spent + reserved + this <= limit") in
one transaction: two calls at once can never both pass a limit only one of them fits under, in
one process or many, on SQLite (one writer at a time) or PostgreSQL (the UPDATE locks the row).
When the call ends, `settle` swaps the reservation for what the API reported it cost. A
reservation nobody settled (its process died) is settled at its full amount after
BUDGET_RESERVATION_TTL seconds: the organisation's money errs on the safe side.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, Value
from django.utils import timezone

from skills_app.core.admission import CallRefused
from skills_app.models import SpendCounter, SpendReservation
from skills_app.policy.access import Limit, Policy

logger = logging.getLogger(__name__)

CENT = Decimal("0.01")
_last_sweep = 0.0
_SWEEP_EVERY = 60.0


class BudgetExceeded(CallRefused):
    """A spending limit stands in the way; the message names it, the figures and what to do."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="budget")


@dataclass(frozen=True, slots=True)
class Reservation:
    id: int
    amount: Decimal


def period_starts(day: date | None = None) -> tuple[date, date]:
    """(today, the first day of this month) in the server's time zone."""
    today = day or timezone.localdate()
    return today, today.replace(day=1)


def usd(amount: Decimal | None) -> str:
    """$12.34 (rounded up to the cent: a limit never looks further away than it is)."""
    value = (amount or Decimal(0)).quantize(CENT, rounding="ROUND_UP")
    return f"${value}"


def usd_left(amount: Decimal) -> str:
    """What is left as $12.34, rounded down: room never looks larger than it is."""
    value = max(Decimal(0), amount).quantize(CENT, rounding="ROUND_DOWN")
    return f"${value}"


def _resets(period: str, today: date) -> str:
    zone = settings.TIME_ZONE
    if period == SpendCounter.DAY:
        return f"at midnight ({zone})"
    following = (today.replace(day=28) + timedelta(days=4)).replace(day=1)
    return f"on {following:%B} 1 ({zone})"


def refusal(
    limit: Limit, period: str, cap: Decimal, spent: Decimal, reserved: Decimal, amount: Decimal
) -> str:
    """The plain message of a limit reached, or of a call that needs more than is left."""
    today = timezone.localdate()
    span = "today" if period == SpendCounter.DAY else "this month"
    whose = (
        f"Your {'daily' if period == SpendCounter.DAY else 'monthly'} spending limit"
        if limit.scope == SpendCounter.USER
        else f"The {'daily' if period == SpendCounter.DAY else 'monthly'} spending limit of "
        f"your group {limit.name}"
    )
    pending = f" ({usd(reserved)} more in answers still running)" if reserved > 0 else ""
    left = usd_left(cap - spent - reserved)
    resets = (
        f"It resets {_resets(period, today)}; an administrator can raise it (the page Your "
        "usage shows what is left)."
    )
    if left == usd_left(Decimal(0)) or amount <= 0:
        need = f", and the next model call could cost up to {usd(amount)}" if amount > 0 else ""
        return (
            f"{whose} of {usd(cap)} is reached: {usd(spent)} spent {span}{pending}{need}. {resets}"
        )
    held = f", {usd(reserved)} held for answers still running" if reserved > 0 else ""
    return (
        f"{whose} of {usd(cap)} has {left} left {span} ({usd(spent)} spent{held}); the next "
        f"model call could cost up to {usd(amount)} (its whole prompt and its full answer at the "
        "most they can be billed), so it was not sent. A shorter message or a new conversation "
        f"needs less. {resets}"
    )


def _counters(policy: Policy, today: date, month: date) -> dict[tuple[str, int, str], int]:
    """(scope, id, period) -> SpendCounter id for the person and their groups, made if missing."""
    wanted = [
        (limit.scope, limit.scope_id, period, start)
        for limit in policy.limits
        for period, start in ((SpendCounter.DAY, today), (SpendCounter.MONTH, month))
    ]
    match = Q(pk__in=[])
    for scope, scope_id, period, start in wanted:
        match |= Q(scope=scope, scope_id=scope_id, period=period, start=start)
    found = {
        (scope, scope_id, period): pk
        for pk, scope, scope_id, period in SpendCounter.objects.filter(match).values_list(
            "pk", "scope", "scope_id", "period"
        )
    }
    missing = [w for w in wanted if (w[0], w[1], w[2]) not in found]
    if missing:
        SpendCounter.objects.bulk_create(
            [SpendCounter(scope=s, scope_id=i, period=p, start=d) for s, i, p, d in missing],
            ignore_conflicts=True,  # made meanwhile by another call: read below
        )
        return _counters(policy, today, month)
    return found


def reserve(policy: Policy, *, model: str, amount: Decimal, purpose: str) -> Reservation:
    """Set `amount` aside on every counter of the person, or raise BudgetExceeded (nothing held)."""
    _sweep_now_and_then()
    today, month = period_starts()
    with transaction.atomic():
        ids = _counters(policy, today, month)
        for limit in policy.limits:
            for period, cap in (
                (SpendCounter.DAY, limit.daily),
                (SpendCounter.MONTH, limit.monthly),
            ):
                pk = ids[(limit.scope, limit.scope_id, period)]
                rows = SpendCounter.objects.filter(pk=pk)
                if cap is not None:
                    # The check and the change in one statement: the row lock (or SQLite's single
                    # writer) makes it atomic against every other reservation.
                    rows = rows.filter(spent_usd__lte=Value(cap - amount) - F("reserved_usd"))
                if not rows.update(reserved_usd=F("reserved_usd") + amount):
                    counter = SpendCounter.objects.get(pk=pk)
                    assert cap is not None
                    raise BudgetExceeded(
                        refusal(limit, period, cap, counter.spent_usd, counter.reserved_usd, amount)
                    )
        row = SpendReservation.objects.create(
            user_id=policy.user_id,
            purpose=purpose[:20],
            model=model[:100],
            amount_usd=amount,
            counters=sorted(ids.values()),
        )
    return Reservation(row.pk, amount)


def renew(
    policy: Policy,
    old: Reservation | None,
    spent: Decimal,
    *,
    need: Decimal,
    want: Decimal,
    purpose: str,
    model: str = "",
) -> Reservation:
    """Settle `old` with what was spent on it, then reserve `want` (or, when that does not fit,
    `need`): a lease of room for the next calls. BudgetExceeded when not even `need` fits."""
    # Each step is its own transaction: the old lease is settled even when no new one fits.
    settle(old, spent)
    if want > need:
        try:
            return reserve(policy, model=model, amount=want, purpose=purpose)
        except BudgetExceeded:
            pass
    return reserve(policy, model=model, amount=need, purpose=purpose)


def settle(reservation: Reservation | None, actual: Decimal | None) -> None:
    """Swap a reservation for what the call cost (None: nothing owed). Idempotent."""
    if reservation is None:
        return
    cost = actual if actual is not None else Decimal(0)
    with transaction.atomic():
        done = SpendReservation.objects.filter(pk=reservation.id, settled_at=None).update(
            settled_at=timezone.now(), actual_usd=cost
        )
        if not done:
            return
        row = SpendReservation.objects.get(pk=reservation.id)
        SpendCounter.objects.filter(pk__in=row.counters).update(
            reserved_usd=F("reserved_usd") - row.amount_usd, spent_usd=F("spent_usd") + cost
        )


def charge(policy: Policy, *, amount: Decimal, purpose: str, model: str) -> None:
    """Count `amount` as spent at once on every counter of the person, whatever is left: for
    something that has happened (an MCP call that ran), checked before with `check_room`."""
    if amount <= 0:
        return
    today, month = period_starts()
    with transaction.atomic():
        ids = _counters(policy, today, month)
        SpendCounter.objects.filter(pk__in=ids.values()).update(spent_usd=F("spent_usd") + amount)
        # A settled reservation: the same record of what was spent as a model call's.
        SpendReservation.objects.create(
            user_id=policy.user_id,
            purpose=purpose[:20],
            model=model[:100],
            amount_usd=amount,
            counters=sorted(ids.values()),
            settled_at=timezone.now(),
            actual_usd=amount,
        )


def check_room(policy: Policy, amount: Decimal = Decimal(0)) -> None:
    """Before something starts: BudgetExceeded when a limit is reached, or when `amount` (an
    estimate of what it will cost) does not fit in what is left."""
    for limit, period, cap, spent, reserved in _standing(policy):
        if cap is None:
            continue
        if spent + reserved >= cap or spent + reserved + amount > cap:
            raise BudgetExceeded(refusal(limit, period, cap, spent, reserved, amount))


@dataclass(frozen=True, slots=True)
class Standing:
    """Where one limit stands now, for the person's usage page."""

    limit: Limit
    period: str
    cap: Decimal | None
    spent: Decimal
    reserved: Decimal

    @property
    def left(self) -> Decimal | None:
        if self.cap is None:
            return None
        return max(Decimal(0), self.cap - self.spent - self.reserved)

    @property
    def share(self) -> int:
        """Percent of the limit used (0-100), for a bar."""
        if not self.cap:
            return 100 if self.cap == 0 else 0
        return min(100, int((self.spent + self.reserved) * 100 / self.cap))


def standings(policy: Policy) -> list[Standing]:
    """Every limit of the person (their own and their groups'), today and this month."""
    return [Standing(*row) for row in _standing(policy)]


def _standing(
    policy: Policy,
) -> list[tuple[Limit, str, Decimal | None, Decimal, Decimal]]:
    today, month = period_starts()
    match = Q(pk__in=[])
    for limit in policy.limits:
        match |= Q(scope=limit.scope, scope_id=limit.scope_id, period=SpendCounter.DAY, start=today)
        match |= Q(
            scope=limit.scope, scope_id=limit.scope_id, period=SpendCounter.MONTH, start=month
        )
    found = {(c.scope, c.scope_id, c.period): c for c in SpendCounter.objects.filter(match)}
    out: list[tuple[Limit, str, Decimal | None, Decimal, Decimal]] = []
    for limit in policy.limits:
        for period, cap in ((SpendCounter.DAY, limit.daily), (SpendCounter.MONTH, limit.monthly)):
            row = found.get((limit.scope, limit.scope_id, period))
            spent = row.spent_usd if row else Decimal(0)
            reserved = row.reserved_usd if row else Decimal(0)
            out.append((limit, period, cap, spent, reserved))
    return out


def sweep_stale(now: datetime | None = None) -> int:
    """Settle reservations older than BUDGET_RESERVATION_TTL at their full amount; how many."""
    cutoff = (now or timezone.now()) - timedelta(seconds=settings.BUDGET_RESERVATION_TTL)
    stale = list(
        SpendReservation.objects.filter(settled_at=None, created_at__lt=cutoff).values_list(
            "pk", "amount_usd"
        )
    )
    for pk, amount in stale:
        logger.warning("settling reservation %s nobody settled at its full amount", pk)
        settle(Reservation(pk, amount), amount)
    return len(stale)


def _sweep_now_and_then() -> None:
    global _last_sweep
    now = time.monotonic()
    if now - _last_sweep < _SWEEP_EVERY:
        return
    _last_sweep = now
    try:
        sweep_stale()
    except Exception:  # the sweep must never stand in the way of a call
        logger.exception("could not settle stale spending reservations")
