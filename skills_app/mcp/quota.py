"""The per-person quota of MCP calls: MCP_CALLS_PER_MINUTE calls that ran, in any conversation.

Counted from the audit trail (the `mcp.called` row each call that ran leaves, by its user), so the
quota holds across runs, tabs and web processes without a shared cache. A call over it is refused
before it leaves, as a recorded decision, with an error result that says when to try again; the
run goes on.
"""

from __future__ import annotations

import math
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from skills_app.models import AuditEvent

WINDOW = timedelta(minutes=1)


def over_quota(user_id: int) -> str | None:
    """Why this person may make no more MCP calls right now, and when they may; None: they may."""
    limit: int = settings.MCP_CALLS_PER_MINUTE
    now = timezone.now()
    recent = AuditEvent.objects.filter(
        action=AuditEvent.MCP_CALLED, actor_id=user_id, created_at__gte=now - WINDOW
    )
    times = list(recent.order_by("-created_at").values_list("created_at", flat=True)[:limit])
    if len(times) < limit:
        return None
    # The call that frees a place is the oldest of the last `limit`: it leaves the window then.
    wait = max(1, math.ceil((times[-1] + WINDOW - now).total_seconds()))
    return (
        f"the MCP call quota is used up: {limit} calls in the last minute (the limit per person "
        f"is {limit} a minute); try this call again in {wait} seconds"
    )
