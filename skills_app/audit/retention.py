"""The only way out of the audit: purging whole conversations older than a date, and logging it.

The unit is a conversation, not a row: a conversation goes when its last activity (and every row
in it) is before the cutoff, so the audit never keeps half a conversation. AuditEvent rows (the
trail of deletions, role changes, exports and purges) are never purged. AUDIT_RETENTION_DAYS
(default: keep forever) is the minimum age: no purge may reach into that window.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from skills_app import trail
from skills_app.audit.guard import purge_allowed
from skills_app.models import (
    AnswerFeedback,
    Approval,
    AuditEvent,
    Conversation,
    ConversationGrant,
    Message,
    ModelCall,
    PermissionDecision,
    Run,
    RunEvent,
    SkillInvocation,
)
from skills_app.workspaces import workspace_for

logger = logging.getLogger(__name__)


class PurgeError(Exception):
    """A purge that may not run; the message says why and what to do instead."""


@dataclass(slots=True)
class PurgeReport:
    before: datetime
    dry_run: bool
    counts: dict[str, int] = field(default_factory=dict)
    conversation_ids: list[int] = field(default_factory=list)


def retention_cutoff(today: date | None = None) -> datetime | None:
    """The start of the retention window (rows younger than this are kept), or None: forever."""
    days = settings.AUDIT_RETENTION_DAYS
    if not days:
        return None
    today = today or timezone.localdate()
    return datetime.combine(today - timedelta(days=days), time.min, timezone.get_current_timezone())


def cutoff_for(before: date | None) -> datetime:
    """The purge cutoff for `--before DATE` (start of that day) or from the retention setting."""
    window = retention_cutoff()
    if before is None:
        if window is None:
            raise PurgeError(
                "AUDIT_RETENTION_DAYS is not set, so the audit is kept forever; give "
                "--before YYYY-MM-DD to purge conversations whose last activity is before a date."
            )
        return window
    cutoff = datetime.combine(before, time.min, timezone.get_current_timezone())
    if cutoff > timezone.now():
        raise PurgeError(f"{before} is in the future; give a date in the past.")
    if window is not None and cutoff > window:
        raise PurgeError(
            f"AUDIT_RETENTION_DAYS={settings.AUDIT_RETENTION_DAYS} keeps everything since "
            f"{window.date()}; give --before {window.date()} or earlier."
        )
    return cutoff


def purgeable(cutoff: datetime) -> QuerySet[Conversation]:
    """Conversations with no activity since the cutoff and nothing running."""
    recent = (
        Q(updated_at__gte=cutoff)
        | Q(created_at__gte=cutoff)
        | Q(messages__created_at__gte=cutoff)
        | Q(events__created_at__gte=cutoff)
        | Q(runs__status__in=Run.ACTIVE)
    )
    fresh = Conversation.objects.filter(recent).values("pk")
    return Conversation.objects.exclude(pk__in=fresh).filter(updated_at__lt=cutoff)


def purge(cutoff: datetime, *, actor_name: str, dry_run: bool = True) -> PurgeReport:
    """Remove (or with dry_run only count) the conversations before `cutoff` and all their rows."""
    report = PurgeReport(before=cutoff, dry_run=dry_run)
    with transaction.atomic():
        ids = list(purgeable(cutoff).values_list("pk", flat=True))
        report.conversation_ids = ids
        tables: list[tuple[str, QuerySet[Any]]] = [
            # Before approvals: a decision names the approval that answered it (PROTECT).
            (
                "permission_decisions",
                PermissionDecision.objects.filter(conversation_id__in=ids),
            ),
            # Before messages: feedback names the answer it rates (PROTECT).
            (
                "answer_feedback",
                AnswerFeedback.objects.filter(message__conversation_id__in=ids),
            ),
            ("messages", Message.objects.filter(conversation_id__in=ids)),
            ("skill_invocations", SkillInvocation.objects.filter(conversation_id__in=ids)),
            ("conversation_grants", ConversationGrant.objects.filter(conversation_id__in=ids)),
            ("approvals", Approval.objects.filter(conversation_id__in=ids)),
            ("run_events", RunEvent.objects.filter(conversation_id__in=ids)),
            ("model_calls", ModelCall.objects.filter(conversation_id__in=ids)),
            ("runs", Run.objects.filter(conversation_id__in=ids)),
            ("conversations", Conversation.objects.filter(pk__in=ids)),
        ]
        report.counts = {name: rows.count() for name, rows in tables}
        if dry_run:
            return report
        with purge_allowed():
            # Children first: the audit's foreign keys are PROTECT.
            Run.objects.filter(conversation_id__in=ids).update(parent=None)
            for _name, rows in tables:
                rows.delete()
        trail.record(
            AuditEvent.PURGE,
            actor_name=actor_name,
            target=f"audit rows before {cutoff.isoformat()}",
            before=cutoff.isoformat(),
            retention_days=settings.AUDIT_RETENTION_DAYS,
            conversation_ids=ids,
            **report.counts,
        )
    for pk in ids:
        shutil.rmtree(workspace_for(pk).root, ignore_errors=True)
    logger.warning(
        "audit purge by %s: %s conversation(s) before %s removed", actor_name, len(ids), cutoff
    )
    return report
