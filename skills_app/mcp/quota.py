"""The per-person quota of MCP calls, and what a call counts against the spending limits.

The quota: MCP_CALLS_PER_MINUTE calls that ran, in any conversation, counted from the audit
trail (the `mcp.called` row each call that ran leaves, by its user), so it holds across runs,
tabs and web processes without a shared cache. A call over it is refused before it leaves, as a
recorded decision, with an error result that says when to try again; the run goes on.

The budgets: a server's `call_cost_usd` (an admin's figure, 0 by default) is what each call of
its tools counts against the person's and their groups' spending limits (`policy.budgets`). A
call that would not fit in what is left is refused before it leaves, like one over the quota;
a call that ran is charged when its `mcp.called` row is written (`offer.call_recorder`).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from skills_app.models import AuditEvent, McpServer, SpendCounter
from skills_app.models.statements import Statement
from skills_app.policy import budgets
from skills_app.policy.access import Policy

PURPOSE = "mcp"

WINDOW = timedelta(minutes=1)


def over_quota(user_id: int) -> str | None:
    """Why this person may make no more MCP calls right now, and when they may; None: they may."""
    limit: int = settings.MCP_CALLS_PER_MINUTE
    now = timezone.now()
    # The time of the person's limit-th newest call: when it is within the window, so are the
    # calls after it, and it is the call that frees a place when it leaves the window. One row
    # from a precompiled statement: the gate asks at every mcp__ call.
    found = _NTH_NEWEST.rows(user_id, shape=(limit - 1,))
    oldest = _as_datetime(found[0][0]) if found else None
    if oldest is None or oldest < now - WINDOW:
        return None
    wait = max(1, math.ceil((oldest + WINDOW - now).total_seconds()))
    return (
        f"the MCP call quota is used up: {limit} calls in the last minute (the limit per person "
        f"is {limit} a minute); try this call again in {wait} seconds"
    )


def call_cost(server: str) -> Decimal:
    """What one call of this server's tools counts against the spending limits."""
    found = McpServer.objects.filter(name=server).values_list("call_cost_usd", flat=True).first()
    return found or Decimal(0)


def over_budget(policy: Policy | None, server: str) -> str | None:
    """Why a call of this server does not fit in the person's spending limits; None: it does."""
    cost = call_cost(server)
    if policy is None or cost <= 0:
        return None
    for s in budgets.standings(policy):
        if s.cap is None or s.spent + s.reserved + cost <= s.cap:
            continue
        day = s.period == SpendCounter.DAY
        whose = "your" if s.limit.scope == SpendCounter.USER else f"your group {s.limit.name}'s"
        held = " (answers still running hold part of it)" if s.reserved > 0 else ""
        return (
            f"a call of the MCP server {server} counts {budgets.usd(cost)} against the spending "
            f"limits, and {whose} {'daily' if day else 'monthly'} spending limit of "
            f"{budgets.usd(s.cap)} has {budgets.usd_left(s.cap - s.spent - s.reserved)} left "
            f"{'today' if day else 'this month'}{held}; an administrator can raise it (the page "
            "Your usage shows what is left)"
        )
    return None


def charge(policy: Policy | None, server: str) -> Decimal:
    """Count a call that ran against the spending limits; what it counted."""
    cost = call_cost(server)
    if policy is not None and cost > 0:
        budgets.charge(policy, amount=cost, purpose=PURPOSE, model=f"mcp:{server}")
    return cost


def _as_datetime(value: object) -> datetime | None:
    """A stored time as the database handed it (a datetime, or SQLite's text in UTC)."""
    if isinstance(value, str):
        value = parse_datetime(value)
    if not isinstance(value, datetime):
        return None
    return value if timezone.is_aware(value) else timezone.make_aware(value, UTC)


_NTH_NEWEST = Statement(
    lambda user_id, skip: (
        AuditEvent.objects.filter(action=AuditEvent.MCP_CALLED, actor_id=user_id)
        .order_by("-created_at")
        .values_list("created_at")[skip : skip + 1]
    ),
    values=1,
)
