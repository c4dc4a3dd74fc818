"""Spending over time for administrators: per user, group, model, skill or purpose, a chart of
dollars per day, and the limits in force with where to raise them.

Users and groups are read from the spending counters (what the budgets charged), models and
purposes from the settled reservations (every entrance: chat, forks, titles, summaries, trigger
runs), skills from the model calls of conversations (trigger runs belong to no skill turn).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import Group
from django.db.models import Sum
from django.db.models.functions import TruncDate
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from skills_app.audit.access import require_audit_viewer
from skills_app.core.chart import build_stacked_chart
from skills_app.models import GroupPolicy, ModelCall, SpendCounter, SpendReservation, UserPolicy
from skills_app.policy import budgets

PER = {
    "user": "User",
    "group": "Group",
    "model": "Model",
    "skill": "Skill",
    "purpose": "What called the model",
}
CENTS = Decimal(100)


class SpendForm(forms.Form):
    per = forms.ChoiceField(choices=list(PER.items()), required=False, label="Per")
    since = forms.DateField(required=False, label="From", widget=forms.DateInput({"type": "date"}))
    until = forms.DateField(required=False, label="To", widget=forms.DateInput({"type": "date"}))

    def period(self) -> tuple[date, date]:
        today = timezone.localdate()
        data = self.cleaned_data if self.is_valid() else {}
        until = data.get("until") or today
        since = data.get("since") or until - timedelta(days=29)
        return (since, until) if since <= until else (until, since)

    @property
    def grouping(self) -> str:
        return (self.cleaned_data.get("per") if self.is_valid() else "") or "user"


def daily(per: str, since: date, until: date) -> dict[tuple[date, str], Decimal]:
    """(day, name) -> dollars spent, for the chosen grouping."""
    out: dict[tuple[date, str], Decimal] = defaultdict(Decimal)
    if per in ("user", "group"):
        scope = SpendCounter.USER if per == "user" else SpendCounter.GROUP
        rows = SpendCounter.objects.filter(
            scope=scope, period=SpendCounter.DAY, start__gte=since, start__lte=until
        ).values_list("start", "scope_id", "spent_usd")
        names = _names(per, {scope_id for _d, scope_id, _s in rows})
        for day, scope_id, spent in rows:
            out[(day, names.get(scope_id, f"#{scope_id}"))] += spent
        return out
    if per == "skill":
        calls = (
            ModelCall.objects.filter(started_at__date__gte=since, started_at__date__lte=until)
            .annotate(day=TruncDate("started_at"))
            .values("day", "skill")
            .annotate(spent=Sum("cost_usd"))
        )
        for row in calls:
            out[(row["day"], row["skill"] or "(no skill loaded)")] += row["spent"] or Decimal(0)
        return out
    field = "model" if per == "model" else "purpose"
    settled = (
        SpendReservation.objects.filter(
            settled_at__isnull=False, created_at__date__gte=since, created_at__date__lte=until
        )
        .annotate(day=TruncDate("created_at"))
        .values("day", field)
        .annotate(spent=Sum("actual_usd"))
    )
    for row in settled:
        out[(row["day"], row[field])] += row["spent"] or Decimal(0)
    return out


def _names(per: str, ids: set[int]) -> dict[int, str]:
    if per == "user":
        return dict(get_user_model().objects.filter(pk__in=ids).values_list("pk", "username"))
    return dict(Group.objects.filter(pk__in=ids).values_list("pk", "name"))


def limits_table(request: HttpRequest) -> list[dict[str, Any]]:
    """Every limit an administrator set, with the link that raises it (for those who may)."""
    can_groups = request.user.has_perm("skills_app.change_grouppolicy")
    can_people = request.user.has_perm("skills_app.change_userpolicy")
    rows: list[dict[str, Any]] = []
    for policy in GroupPolicy.objects.select_related("group").order_by("group__name"):
        if policy.daily_limit_usd is None and policy.monthly_limit_usd is None:
            continue
        rows.append(
            {
                "whose": f"group {policy.group.name}",
                "daily": policy.daily_limit_usd,
                "monthly": policy.monthly_limit_usd,
                "link": reverse("admin:auth_group_change", args=[policy.group_id])
                if can_groups
                else "",
            }
        )
    for own in UserPolicy.objects.select_related("user").order_by("user__username"):
        if own.daily_limit_usd is None and own.monthly_limit_usd is None:
            continue
        rows.append(
            {
                "whose": f"user {own.user.get_username()}",
                "daily": own.daily_limit_usd,
                "monthly": own.monthly_limit_usd,
                "link": reverse("admin:skills_app_userpolicy_change", args=[own.pk])
                if can_people
                else "",
            }
        )
    return rows


@login_required
@require_GET
def spend_report(request: HttpRequest) -> HttpResponse:
    """Dollars per day per user, group, model, skill or purpose, and the limits (auditors)."""
    require_audit_viewer(request)
    form = SpendForm(request.GET or None)
    since, until = form.period()
    spent = daily(form.grouping, since, until)
    cents = {key: int((value * CENTS).to_integral_value()) for key, value in spent.items()}
    totals: dict[str, Decimal] = defaultdict(Decimal)
    for (_day, name), value in spent.items():
        totals[name] += value
    table = sorted(totals.items(), key=lambda item: (-item[1], item[0]))

    return render(
        request,
        "skills_app/audit/spend.html",
        {
            "form": form,
            "per": PER[form.grouping],
            "since": since,
            "until": until,
            "chart": build_stacked_chart(cents, since, until),
            "table": [(name, budgets.usd(value)) for name, value in table],
            "total": budgets.usd(sum(totals.values(), Decimal(0))),
            "limits": limits_table(request),
            "default_daily": settings.BUDGET_USER_DAILY_USD,
            "default_monthly": settings.BUDGET_USER_MONTHLY_USD,
            "add_user_limit": reverse("admin:skills_app_userpolicy_add")
            if request.user.has_perm("skills_app.add_userpolicy")
            else "",
        },
    )
