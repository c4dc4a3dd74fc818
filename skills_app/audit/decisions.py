"""The audit's permission decisions and skill reviews (audit viewers: the Auditor and
Administrator roles).

- decisions: every call a run decided, with what decided it (the rule and where it came from,
  the review, the person who answered) and the call, filterable by decision, by rule, by
  reviewer, by source, by skill and by user;
- reviews: every step of every organisation skill version's review, filterable by skill, by
  person and by step.

Calls may quote hidden text: for a viewer without the inspect permission they pass through the
conversation's outbound filter, like every audit page.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from skills_app.audit.access import require_audit_viewer
from skills_app.models import PermissionDecision, SkillReview
from skills_app.visibility import INSPECT_PERMISSION, Outbound, outbound

PAGE_SIZE = 50


# Filters over text that may quote hidden skill text (only for inspectors).
QUOTING_FILTERS = ("call", "rule")


class DecisionFilterForm(forms.Form):
    decision = forms.ChoiceField(
        required=False, choices=[("", "any"), *PermissionDecision.Outcome.choices]
    )
    source = forms.ChoiceField(
        required=False,
        label="Decided by",
        choices=[("", "anything"), *PermissionDecision.Source.choices],
    )
    rule = forms.CharField(required=False, max_length=500, label="Rule contains")
    reviewer = forms.CharField(required=False, max_length=150)
    skill = forms.CharField(required=False, max_length=200)
    user = forms.CharField(required=False, max_length=150, label="User")
    call = forms.CharField(required=False, max_length=500, label="Call contains")

    def __init__(self, *args: Any, can_inspect: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.can_inspect = can_inspect

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        # A count of calls (or rules) containing a guess reads hidden text one guess at a time.
        for name in QUOTING_FILTERS:
            if data.get(name) and not self.can_inspect:
                self.add_error(
                    name,
                    "Filtering by the text of a call or a rule needs the permission to inspect "
                    "injected content: they may quote a skill's hidden instructions. Filter by "
                    "skill, user, decision or reviewer instead.",
                )
        return data

    def filter(self, rows: QuerySet[PermissionDecision]) -> QuerySet[PermissionDecision]:
        data = self.cleaned_data
        if data.get("decision"):
            rows = rows.filter(decision=data["decision"])
        if data.get("source"):
            rows = rows.filter(source=data["source"])
        if data.get("rule"):
            rows = rows.filter(rule_text__icontains=data["rule"].strip())
        if data.get("reviewer"):
            who = data["reviewer"].strip()
            rows = rows.filter(Q(reviewer_name=who) | Q(reviewer__username=who))
        if data.get("skill"):
            rows = rows.filter(skill=data["skill"].strip())
        if data.get("user"):
            rows = rows.filter(conversation__owner__username=data["user"].strip())
        if data.get("call"):
            rows = rows.filter(call_text__icontains=data["call"].strip())
        return rows


def who_decided(row: PermissionDecision) -> str:
    """What decided, in words: "allowed by the review of x v2 by mona", "denied by alice"..."""
    if row.source == PermissionDecision.Source.USER and row.approver is not None:
        return f"{row.reason} (asked: {row.rule_text or 'default'})"
    return row.reason


def _filtered(
    rows: list[PermissionDecision], can_inspect: bool, viewer_id: int | None
) -> list[dict[str, Any]]:
    filters: dict[int, Outbound] = {}
    out = []
    for row in rows:
        # The viewer is not the conversation's owner: its owner's personal skills are hidden too.
        view = filters.setdefault(
            row.conversation_id,
            outbound(row.conversation_id, can_inspect=can_inspect, viewer_id=viewer_id),
        )
        out.append(
            {
                "row": row,
                "call": view.text(row.call_text),
                "why": view.text(who_decided(row)),
                # A reviewed command or an allowed-tools entry is the skill's own text.
                "rule": view.text(row.rule_text),
            }
        )
    return out


def _page(request: HttpRequest, rows: QuerySet[Any]) -> tuple[Any, str]:
    page = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return page, query.urlencode()


@login_required
@require_GET
def decision_list(request: HttpRequest) -> HttpResponse:
    """Every permission decision, newest first, filtered and paginated."""
    require_audit_viewer(request)
    can_inspect = request.user.has_perm(INSPECT_PERMISSION)
    form = DecisionFilterForm(request.GET or None, can_inspect=can_inspect)
    rows = PermissionDecision.objects.select_related(
        "conversation__owner", "reviewer", "approver", "review"
    ).order_by("-created_at", "-pk")
    status = 200
    if form.is_bound:
        if form.is_valid():
            rows = form.filter(rows)
        elif any(name in form.errors for name in QUOTING_FILTERS):
            # No count at all: a refused filter must not fall back to listing everything.
            rows = rows.none()
            status = 400
    page, query = _page(request, rows)
    return render(
        request,
        "skills_app/audit/decisions.html",
        {
            "form": form,
            "page": page,
            "rows": _filtered(list(page.object_list), can_inspect, request.user.pk),
            "query": query,
            "can_inspect": can_inspect,
        },
        status=status,
    )


class ReviewFilterForm(forms.Form):
    skill = forms.CharField(required=False, max_length=200)
    person = forms.CharField(required=False, max_length=150)
    action = forms.ChoiceField(
        required=False, label="Step", choices=[("", "any"), *SkillReview.Action.choices]
    )


@login_required
@require_GET
def review_list(request: HttpRequest) -> HttpResponse:
    """Every step of every organisation skill review, newest first."""
    require_audit_viewer(request)
    form = ReviewFilterForm(request.GET or None)
    rows = SkillReview.objects.select_related("actor").order_by("-created_at", "-pk")
    if form.is_bound and form.is_valid():
        data = form.cleaned_data
        if data.get("skill"):
            rows = rows.filter(package_name=data["skill"].strip())
        if data.get("person"):
            rows = rows.filter(actor_name=data["person"].strip())
        if data.get("action"):
            rows = rows.filter(action=data["action"])
    page, query = _page(request, rows)
    return render(
        request,
        "skills_app/audit/reviews.html",
        {"form": form, "page": page, "query": query},
    )


__all__ = ["DecisionFilterForm", "decision_list", "review_list", "who_decided"]
