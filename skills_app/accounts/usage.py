"""Your usage: what you spent today and this month, against each limit (yours and your groups'),
what is left, and how much of your storage quota your files take."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from skills_app.core.tools.storage import human
from skills_app.http import AuthedHttpRequest
from skills_app.models import SpendCounter
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
    return render(
        request,
        "skills_app/usage.html",
        {
            "rows": rows,
            "models": policy.models,
            "storage_used": human(files.used),
            "storage_quota": human(files.quota) if files.quota is not None else "",
            "storage_left": human(files.left) if files.left is not None else "",
            "storage_share": files.share,
            "free_space": storage.FREE_SPACE,
        },
    )
