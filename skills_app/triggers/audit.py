"""Trigger runs in the audit: who measured which skill version, on which model, at what cost.

Listed apart from conversations, and left out of the audit's invocation and cost figures: a
trigger run makes no SkillInvocation, Conversation or ModelCall row.
"""

from __future__ import annotations

from decimal import Decimal

from django.contrib.auth.decorators import login_required
from django.db.models import Count, Sum
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from skills_app.audit.access import require_audit_viewer
from skills_app.core.pricing import format_usd
from skills_app.models import TriggerRun
from skills_app.registry.trigger_report import figures
from skills_app.triggers import runs

ROW_LIMIT = 200


def totals() -> dict[str, object]:
    """How many trigger runs there were and what they cost in all (for the audit home, too)."""
    summary = TriggerRun.objects.aggregate(
        n=Count("id"), cost=Sum("cost_usd"), attempts=Sum("attempts_done")
    )
    cost = summary["cost"]
    return {
        "runs": summary["n"] or 0,
        "attempts": summary["attempts"] or 0,
        "cost": format_usd(cost) if cost is not None else "no cost",
        "cost_value": cost if cost is not None else Decimal(0),
    }


@login_required
@require_GET
def trigger_run_list(request: HttpRequest) -> HttpResponse:
    """Every trigger run, newest first, with who started it, the version, model and cost."""
    require_audit_viewer(request)
    runs.interrupt_stale()
    rows = TriggerRun.objects.select_related("package").order_by("-pk")[:ROW_LIMIT]
    context = {
        "rows": [(run, figures(run)) for run in rows],
        "totals": totals(),
        "limit": ROW_LIMIT,
    }
    return render(request, "skills_app/triggers/audit.html", context)
