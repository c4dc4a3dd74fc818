"""Usage and cost in the audit: model calls summed per run, skill, user, model or conversation
over a period, as a page and as CSV (staff only).

A call counts for the skill invoked last in its turn (`ModelCall.skill`): what loading and
running that skill cost. The demo model's calls cost nothing and say so.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from datetime import datetime, time
from decimal import Decimal
from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.db.models import Count, F, Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from skills_app.audit.access import require_audit_viewer
from skills_app.chat.usage import TOTALS, UsageFigures, figures
from skills_app.models import Conversation, ModelCall, Run, SkillInvocation
from skills_app.visibility import INSPECT_PERMISSION

ROW_LIMIT = 500
# Which ModelCall field each grouping sums by, and its heading.
GROUPS: dict[str, tuple[str, str]] = {
    "run": ("run_id", "Run"),
    "skill": ("skill", "Skill"),
    "user": ("conversation__owner__username", "User"),
    "model": ("model", "Model"),
    "conversation": ("conversation_id", "Conversation"),
}
NO_SKILL = "(no skill loaded)"
# Spreadsheets run a cell that starts with one of these as a formula.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


class CostFilterForm(forms.Form):
    group = forms.ChoiceField(
        choices=[(key, label.lower()) for key, (_f, label) in GROUPS.items()],
        required=False,
        label="Per",
    )
    since = forms.DateField(required=False, label="From", widget=forms.DateInput({"type": "date"}))
    until = forms.DateField(required=False, label="To", widget=forms.DateInput({"type": "date"}))
    user = forms.CharField(required=False, max_length=150)
    model = forms.CharField(required=False, max_length=100)
    skill = forms.CharField(required=False, max_length=200)

    def calls(self) -> QuerySet[ModelCall]:
        """The model calls the filters select (all when the form is not valid)."""
        rows = ModelCall.objects.all()
        if not self.is_valid():
            return rows
        data = self.cleaned_data
        zone = timezone.get_current_timezone()
        if data.get("since"):
            rows = rows.filter(started_at__gte=datetime.combine(data["since"], time.min, zone))
        if data.get("until"):
            rows = rows.filter(started_at__lte=datetime.combine(data["until"], time.max, zone))
        if data.get("user"):
            rows = rows.filter(conversation__owner__username=data["user"].strip())
        if data.get("model"):
            rows = rows.filter(model=data["model"].strip())
        if data.get("skill"):
            rows = rows.filter(skill=data["skill"].strip())
        return rows

    @property
    def grouping(self) -> str:
        value = self.cleaned_data.get("group") if self.is_valid() else ""
        return value or "skill"


@dataclass(frozen=True, slots=True)
class CostRow:
    """One line of the report: a run, skill, user, model or conversation and its figures."""

    key: Any
    label: str
    detail: str
    figures: UsageFigures
    cost: Decimal | None
    loads: int | None = None  # skills: how many times it was loaded in the period
    link: str = ""


def cost_rows(form: CostFilterForm, *, can_inspect: bool = False) -> list[CostRow]:
    """The report's lines, most expensive first."""
    field, _label = GROUPS[form.grouping]
    calls = form.calls()
    grouped = (
        calls.values(field)
        .annotate(**TOTALS)
        .order_by(F("cost").desc(nulls_last=True), "-calls", field)[:ROW_LIMIT]
    )
    totals = list(grouped)
    labels = _labels(form.grouping, [t[field] for t in totals], can_inspect=can_inspect)
    loads = _loads(form) if form.grouping == "skill" else {}
    rows = []
    for item in totals:
        key = item[field]
        label, detail, link = labels.get(key, (str(key), "", ""))
        rows.append(
            CostRow(
                key=key,
                label=label,
                detail=detail,
                figures=figures(item),
                cost=item["cost"] if item["priced"] else None,
                loads=loads.get(key, 0) if form.grouping == "skill" and key else None,
                link=link,
            )
        )
    return rows


def _labels(group: str, keys: list[Any], *, can_inspect: bool) -> dict[Any, tuple[str, str, str]]:
    if group == "skill":
        return {key: (key or NO_SKILL, "", "") for key in keys}
    if group == "run":
        found = Run.objects.filter(pk__in=[k for k in keys if k]).select_related(
            "conversation__owner"
        )
        labels: dict[Any, tuple[str, str, str]] = {
            None: ("(no run)", "summaries for a new conversation", "")
        }
        for run in found:
            link = (
                reverse("audit-conversation", args=[run.conversation_id]) + f"#run-{run.pk}"
                if can_inspect
                else ""
            )
            detail = (
                f"{run.started_at:%Y-%m-%d %H:%M} · {run.conversation.owner.get_username()} · "
                f"{run.conversation.title} · {run.status}"
            )
            labels[run.pk] = (f"#{run.pk}", detail, link)
        return labels
    if group == "conversation":
        found_conversations = Conversation.objects.filter(pk__in=keys).select_related("owner")
        return {
            c.pk: (
                f"#{c.pk} {c.title}",
                c.owner.get_username(),
                reverse("audit-conversation", args=[c.pk]) if can_inspect else "",
            )
            for c in found_conversations
        }
    return {key: (key or "(unknown)", "", "") for key in keys}


def _loads(form: CostFilterForm) -> dict[str, int]:
    """Skill name -> successful invocations in the same period (and for the same user)."""
    rows = SkillInvocation.objects.filter(decision="allowed")
    if form.is_valid():
        data = form.cleaned_data
        zone = timezone.get_current_timezone()
        if data.get("since"):
            rows = rows.filter(created_at__gte=datetime.combine(data["since"], time.min, zone))
        if data.get("until"):
            rows = rows.filter(created_at__lte=datetime.combine(data["until"], time.max, zone))
        if data.get("user"):
            rows = rows.filter(conversation__owner__username=data["user"].strip())
    counted = rows.values("skill").annotate(n=Count("pk", filter=Q(already_loaded=False)))
    return {item["skill"]: item["n"] for item in counted}


def _cell(value: Any) -> str:
    """A CSV cell a spreadsheet shows as text, never runs as a formula."""
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(_FORMULA_START) else text


def csv_response(form: CostFilterForm, rows: list[CostRow]) -> HttpResponse:
    _field, heading = GROUPS[form.grouping]
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = (
        f'attachment; filename="skillscope-costs-per-{form.grouping}.csv"'
    )
    writer = csv.writer(response)
    header = [heading.lower(), "detail", "calls", "input_tokens", "cache_read_input_tokens"]
    header += ["cache_creation_input_tokens", "output_tokens", "cost_usd", "cost"]
    if form.grouping == "skill":
        header.append("loads")
    writer.writerow(header)
    for row in rows:
        f = row.figures
        line = [_cell(row.label), _cell(row.detail), f.calls, f.input_tokens, f.cache_read]
        line += [
            f.cache_write,
            f.output_tokens,
            "" if row.cost is None else row.cost,
            _cell(f.cost),
        ]
        if form.grouping == "skill":
            line.append("" if row.loads is None else row.loads)
        writer.writerow(line)
    return response


@login_required
@require_GET
def cost_report(request: HttpRequest) -> HttpResponse:
    """Tokens and cost per run, skill, user, model or conversation over a period (auditors)."""
    require_audit_viewer(request)
    form = CostFilterForm(request.GET or None)
    can_inspect = request.user.has_perm(INSPECT_PERMISSION)
    rows = cost_rows(form, can_inspect=can_inspect)
    if request.GET.get("format") == "csv":
        return csv_response(form, rows)
    total = form.calls().aggregate(**TOTALS)
    query = request.GET.copy()
    query["format"] = "csv"
    return render(
        request,
        "skills_app/audit/costs.html",
        {
            "form": form,
            "rows": rows,
            "heading": GROUPS[form.grouping][1],
            "group": form.grouping,
            "total": figures(total) if total["calls"] else None,
            "csv_query": query.urlencode(),
            "limit": ROW_LIMIT,
        },
    )
