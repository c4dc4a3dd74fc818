"""The audit home: which skills ran and what was injected, filtered, counted, charted, exported.

For people who may view the audit (the Auditor and Administrator roles). The injected text itself
stays with those who may inspect hidden content: others see that something was injected, never
what (nor how long it was). Every CSV export is recorded in the audit trail.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, Q, QuerySet
from django.db.models.functions import TruncDate
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from skills_app import trail
from skills_app.audit.access import require_audit_viewer
from skills_app.audit.invocations import decided_by, filter_invocation
from skills_app.core.chart import build_stacked_chart
from skills_app.core.profiles import profile_choices
from skills_app.models import AuditEvent, Comparison, SkillInvocation
from skills_app.visibility import INSPECT_PERMISSION, outbound

PAGE_SIZE = 50
CHART_DEFAULT_DAYS = 30
_VERSION_NUMBER = re.compile(r"v?(\d{1,9})", re.I)
_DIGEST_PREFIX = re.compile(r"[0-9a-f]{4,64}")
# A spreadsheet runs a cell that starts with one of these as a formula (CSV injection).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


class AuditFilterForm(forms.Form):
    """Which invocations: every field narrows; an empty form means all of them."""

    skill = forms.CharField(
        required=False, max_length=200, widget=forms.TextInput({"list": "audit-skills"})
    )
    version = forms.CharField(
        required=False,
        max_length=64,
        help_text="A version number (v3) or the start of a digest.",
        widget=forms.TextInput({"placeholder": "v3 or 1a2b3c"}),
    )
    user = forms.CharField(required=False, max_length=150, label="User")
    caller = forms.ChoiceField(
        required=False, choices=[("", "any"), *SkillInvocation.Caller.choices]
    )
    decision = forms.ChoiceField(
        required=False,
        choices=[("", "any"), ("allowed", "allowed"), ("denied", "denied"), ("failed", "failed")],
    )
    profile = forms.ChoiceField(required=False, choices=[("", "any"), *profile_choices()])
    state = forms.ChoiceField(
        required=False,
        label="Conversation",
        choices=[("", "any"), ("kept", "kept by its owner"), ("deleted", "deleted by its owner")],
    )
    # Comparison runs (the delivery-profile comparison) are test traffic: apart unless asked for.
    origin = forms.ChoiceField(
        required=False,
        label="Runs of",
        choices=[("", "chats"), ("compare", "comparisons"), ("all", "chats and comparisons")],
    )
    since = forms.DateField(required=False, label="From", widget=forms.DateInput({"type": "date"}))
    until = forms.DateField(required=False, label="To", widget=forms.DateInput({"type": "date"}))

    def clean_version(self) -> str:
        text: str = self.cleaned_data["version"].strip()
        if text and not (_VERSION_NUMBER.fullmatch(text) or _DIGEST_PREFIX.fullmatch(text)):
            raise forms.ValidationError(
                "Give a version number such as v3, or at least 4 hex digits of a digest."
            )
        return text

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        since, until = data.get("since"), data.get("until")
        if since and until and since > until:
            raise forms.ValidationError("The From date is after the To date; swap them.")
        return data

    def filter(self, rows: QuerySet[SkillInvocation]) -> QuerySet[SkillInvocation]:
        data = self.cleaned_data
        if data.get("skill"):
            rows = rows.filter(skill=data["skill"].strip())
        version = data.get("version") or ""
        number = _VERSION_NUMBER.fullmatch(version)
        if number:
            rows = rows.filter(version__number=int(number[1]))
        elif version:
            rows = rows.filter(digest__startswith=version.lower())
        if data.get("user"):
            rows = rows.filter(conversation__owner__username=data["user"].strip())
        for field in ("caller", "decision"):
            if data.get(field):
                rows = rows.filter(**{field: data[field]})
        if data.get("profile"):
            rows = rows.filter(conversation__profile=data["profile"])
        if data.get("state") == "kept":
            rows = rows.filter(conversation__deleted_at__isnull=True)
        elif data.get("state") == "deleted":
            rows = rows.filter(conversation__deleted_at__isnull=False)
        rows = by_origin(rows, data.get("origin") or "")
        zone = timezone.get_current_timezone()
        if data.get("since"):
            rows = rows.filter(created_at__gte=datetime.combine(data["since"], time.min, zone))
        if data.get("until"):
            rows = rows.filter(created_at__lte=datetime.combine(data["until"], time.max, zone))
        return rows

    def applied(self) -> dict[str, str]:
        """The filters in use, as text (for the export's audit record)."""
        if not self.is_bound or not self.is_valid():
            return {}
        return {k: str(v) for k, v in self.cleaned_data.items() if v not in (None, "")}


def filtered_rows(request: HttpRequest) -> tuple[AuditFilterForm, QuerySet[SkillInvocation]]:
    """The filter form from the query string and the invocations it selects, newest first."""
    form = AuditFilterForm(request.GET or None)
    rows = SkillInvocation.objects.select_related(
        "conversation__owner", "conversation__deleted_by", "version", "approval__answered_by"
    ).order_by("-created_at", "-pk")
    if form.is_bound:
        rows = form.filter(rows) if form.is_valid() else rows.none()
    else:
        rows = by_origin(rows, "")
    return form, rows


def comparison_conversations() -> QuerySet[Any]:
    """The ids of the conversations the delivery-profile comparison made."""
    return Comparison.conversations.through.objects.values("conversation_id")


def by_origin(rows: QuerySet[SkillInvocation], origin: str) -> QuerySet[SkillInvocation]:
    """Chats only (""), comparison runs only ("compare"), or both ("all")."""
    if origin == "all":
        return rows
    if origin == "compare":
        return rows.filter(conversation_id__in=comparison_conversations())
    return rows.exclude(conversation_id__in=comparison_conversations())


def _counts(rows: QuerySet[SkillInvocation]) -> dict[str, int]:
    return rows.order_by().aggregate(
        total=Count("pk"),
        allowed=Count("pk", filter=Q(decision="allowed")),
        denied=Count("pk", filter=Q(decision="denied")),
        failed=Count("pk", filter=Q(decision="failed")),
        by_model=Count("pk", filter=Q(caller=SkillInvocation.MODEL)),
        by_user=Count("pk", filter=Q(caller=SkillInvocation.USER)),
        skills=Count("skill", distinct=True),
        users=Count("conversation__owner", distinct=True),
        conversations=Count("conversation", distinct=True),
        deleted=Count(
            "conversation", distinct=True, filter=Q(conversation__deleted_at__isnull=False)
        ),
    )


def _chart_range(form: AuditFilterForm) -> tuple[date, date]:
    today = timezone.localdate()
    data = form.cleaned_data if form.is_bound and form.is_valid() else {}
    until = data.get("until") or today
    since = data.get("since") or until - timedelta(days=CHART_DEFAULT_DAYS - 1)
    return since, until


def _chart(rows: QuerySet[SkillInvocation], since: date, until: date) -> Any:
    zone = timezone.get_current_timezone()
    window = rows.filter(
        created_at__gte=datetime.combine(since, time.min, zone),
        created_at__lte=datetime.combine(until, time.max, zone),
    )
    per_day = (
        window.order_by()
        .annotate(day=TruncDate("created_at", tzinfo=zone))
        .values("day", "skill")
        .annotate(n=Count("pk"))
    )
    return build_stacked_chart({(r["day"], r["skill"]): r["n"] for r in per_day}, since, until)


@login_required
@require_GET
def audit_home(request: HttpRequest) -> HttpResponse:
    """Which skills ran and what was injected: filters, counts, a chart and the rows."""
    require_audit_viewer(request)
    form, rows = filtered_rows(request)
    since, until = _chart_range(form)
    page = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "skills_app/audit/home.html",
        {
            "form": form,
            "counts": _counts(rows),
            # Counted apart and said so: comparison runs are not in the totals above.
            "comparison_invocations": (
                SkillInvocation.objects.filter(
                    conversation_id__in=comparison_conversations()
                ).count()
                if form.data.get("origin", "") == ""
                else 0
            ),
            "chart": _chart(rows, since, until),
            "chart_since": since,
            "chart_until": until,
            "page": page,
            "rows": [(inv, decided_by(inv)) for inv in _shown(page.object_list, request.user)],
            "query": query.urlencode(),
            "can_inspect": request.user.has_perm(INSPECT_PERMISSION),
            "known_skills": SkillInvocation.objects.order_by("skill")
            .values_list("skill", flat=True)
            .distinct()[:500],
        },
    )


def _shown(invocations: Any, user: Any) -> list[SkillInvocation]:
    """The rows as this person may see them: args and errors filtered for non-inspectors."""
    rows = list(invocations)
    if not user.has_perm(INSPECT_PERMISSION):
        for inv in rows:
            filter_invocation(
                inv, outbound(inv.conversation_id, can_inspect=False, viewer_id=user.pk)
            )
    return rows


CSV_COLUMNS = (
    "invocation",
    "time_utc",
    "user",
    "conversation",
    "conversation_title",
    "conversation_deleted_at_utc",
    "profile",
    "run",
    "skill",
    "source",
    "version",
    "digest",
    "caller",
    "args",
    "decision",
    "decided_by",
    "error_code",
    "allowed_tools",
    "disallowed_tools",
    "model_override",
    "injected_text",
    "detail_url",
)


def csv_cell(value: Any) -> str:
    """A cell a spreadsheet shows as text: a leading formula character gets a quote before it."""
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(_FORMULA_START) else text


def _utc(moment: datetime | None) -> str:
    return moment.astimezone(UTC).isoformat() if moment else ""


def csv_lines(
    rows: QuerySet[SkillInvocation],
    *,
    can_inspect: bool,
    base_url: str,
    viewer_id: int | None = None,
) -> Iterator[str]:
    """The CSV text, a row at a time; the injected text only for inspectors."""

    class _Line:
        def write(self, value: str) -> str:
            return value

    writer = csv.writer(_Line())
    yield writer.writerow(CSV_COLUMNS)
    for inv in rows.iterator(chunk_size=500):
        if not can_inspect:
            out = outbound(inv.conversation_id, can_inspect=False, viewer_id=viewer_id)
            filter_invocation(inv, out)
        conversation = inv.conversation
        injected = inv.injected_text if can_inspect else ("(withheld)" if inv.injected_text else "")
        values = (
            inv.pk,
            _utc(inv.created_at),
            conversation.owner.get_username(),
            conversation.pk,
            conversation.title,
            _utc(conversation.deleted_at),
            conversation.profile,
            inv.run_id or "",
            inv.skill,
            inv.source,
            f"v{inv.version.number}" if inv.version else "",
            inv.digest,
            inv.caller,
            inv.args,
            inv.decision,
            decided_by(inv),
            inv.error_code,
            " ".join(inv.allowed_tools or []),
            " ".join(inv.disallowed_tools or []),
            inv.model_override,
            injected,
            base_url + reverse("audit-invocation", args=[inv.pk]),
        )
        yield writer.writerow([csv_cell(v) for v in values])


@login_required
@require_GET
def audit_export_csv(request: HttpRequest) -> HttpResponseBase:
    """The filtered invocations as CSV (every row, not one page); recorded in the audit trail."""
    require_audit_viewer(request)
    form, rows = filtered_rows(request)
    if form.is_bound and not form.is_valid():
        errors = "; ".join(f"{k}: {' '.join(map(str, v))}" for k, v in form.errors.items())
        return HttpResponse(
            f"Nothing was exported: {errors}", status=400, content_type="text/plain; charset=utf-8"
        )
    can_inspect = request.user.has_perm(INSPECT_PERMISSION)
    trail.record(
        AuditEvent.EXPORT,
        actor=request.user,
        target="skill invocations (CSV)",
        filters=form.applied(),
        rows=rows.count(),
        injected_text=can_inspect,
    )
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    response = StreamingHttpResponse(
        # Links in the file use the one public URL, like every absolute URL Skillscope writes.
        csv_lines(
            rows,
            can_inspect=can_inspect,
            base_url=settings.SKILLSCOPE_PUBLIC_URL,
            viewer_id=request.user.pk,
        ),
        content_type="text/csv; charset=utf-8",
    )
    response["Content-Disposition"] = f'attachment; filename="skill-invocations-{stamp}.csv"'
    response["X-Content-Type-Options"] = "nosniff"
    return response
