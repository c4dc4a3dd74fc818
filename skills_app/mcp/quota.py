"""The per-person quota of MCP calls: MCP_CALLS_PER_MINUTE calls that ran, in any conversation.

Counted from the audit trail (the `mcp.called` row each call that ran leaves, by its user), so the
quota holds across runs, tabs and web processes without a shared cache. A call over it is refused
before it leaves, as a recorded decision, with an error result that says when to try again; the
run goes on.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from skills_app.models import AuditEvent
from skills_app.models.statements import Statement

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
