"""Your usage: what you spent today and this month, against each limit (yours and your groups'),
what is left, your MCP tool calls this month and what they counted, and how much of your storage
quota your files take."""

from __future__ import annotations

from datetime import datetime, time

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db.models import Sum
from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from skills_app.core.tools.storage import human
from skills_app.http import AuthedHttpRequest
from skills_app.mcp import quota
from skills_app.models import AuditEvent, SpendCounter, SpendReservation
from skills_app.policy import budgets, storage
from skills_app.policy.access import policy_for


@login_required
@require_GET
def my_usage(request: AuthedHttpRequest) -> HttpResponse:
    policy = policy_for(request.user.pk)
    rows = []
    for s in budgets.standings(policy):
        if s.limit.scope != SpendCounter.USER and s.cap is None:
            continue  # a group without a limit here: nothing to tell
        rows.append(
            {
                "whose": "You" if s.limit.scope == SpendCounter.USER else f"Group {s.limit.name}",
                "period": "today" if s.period == SpendCounter.DAY else "this month",
                "spent": budgets.usd(s.spent + s.reserved),
                "limit": budgets.usd(s.cap) if s.cap is not None else "no limit",
                "left": budgets.usd(s.left) if s.left is not None else "—",
                "share": s.share,
                "capped": s.cap is not None,
            }
        )
    files = storage.standing(request.user.pk)
    since = timezone.make_aware(datetime.combine(budgets.period_starts()[1], time.min))
    mcp_calls = AuditEvent.objects.filter(
        action=AuditEvent.MCP_CALLED, actor_id=request.user.pk, created_at__gte=since
    ).count()
    mcp_cost = SpendReservation.objects.filter(
        user_id=request.user.pk, purpose=quota.PURPOSE, created_at__gte=since
    ).aggregate(cost=Sum("actual_usd"))["cost"]
    return render(
        request,
        "skills_app/usage.html",
        {
            "rows": rows,
            "models": policy.models,
            "mcp_calls": mcp_calls,
            "mcp_cost": budgets.usd(mcp_cost) if mcp_cost else "",
            "mcp_per_minute": settings.MCP_CALLS_PER_MINUTE,
            "storage_used": human(files.used),
            "storage_quota": human(files.quota) if files.quota is not None else "",
            "storage_left": human(files.left) if files.left is not None else "",
            "storage_share": files.share,
            "free_space": storage.FREE_SPACE,
        },
    )
