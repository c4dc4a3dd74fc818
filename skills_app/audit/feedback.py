"""What people thought of the answers a skill version helped write, for auditors."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib.auth.decorators import login_required
from django.db.models import Count, Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from skills_app.audit.access import require_audit_viewer
from skills_app.models import AnswerFeedback, SkillInvocation
from skills_app.visibility import INSPECT_PERMISSION

# The notes page shows the latest; counts are over all of them.
NOTES_SHOWN = 200


@dataclass(slots=True)
class VersionFeedback:
    up: int = 0
    down: int = 0
    latest: list[AnswerFeedback] = field(default_factory=list)


def _rated(skill: str, digest: str) -> QuerySet[AnswerFeedback]:
    """Feedback on answers of runs in which this skill version was loaded."""
    runs = SkillInvocation.objects.filter(
        skill=skill, digest=digest, decision="allowed", run__isnull=False
    ).values("run_id")
    return AnswerFeedback.objects.filter(message__run_id__in=runs)


def feedback_counts(skill: str, digest: str) -> VersionFeedback:
    """Thumbs up and down on the answers of the runs that loaded (skill, digest)."""
    if not digest:
        return VersionFeedback()
    totals = _rated(skill, digest).aggregate(
        up=Count("pk", filter=Q(rating=AnswerFeedback.UP)),
        down=Count("pk", filter=Q(rating=AnswerFeedback.DOWN)),
    )
    return VersionFeedback(up=totals["up"], down=totals["down"])


@login_required
@require_GET
def version_feedback(request: HttpRequest, skill: str, digest: str) -> HttpResponse:
    """Counts and notes of the feedback on answers written with one version of a skill."""
    require_audit_viewer(request)
    if not SkillInvocation.objects.filter(skill=skill, digest=digest).exists():
        raise Http404("No invocation of that skill version.")
    summary = feedback_counts(skill, digest)
    rated = _rated(skill, digest).select_related("user", "message__conversation")
    summary.latest = list(rated.order_by("-updated_at", "-pk")[:NOTES_SHOWN])
    return render(
        request,
        "skills_app/audit/feedback.html",
        {
            "skill": skill,
            "digest": digest,
            "summary": summary,
            "shown": NOTES_SHOWN,
            "can_inspect": request.user.has_perm(INSPECT_PERMISSION),
        },
    )
