"""The audit is append-only: no view, admin action, cascade or queryset deletes an audit row.

Every way Django deletes rows (`Model.delete()`, `QuerySet.delete()`, a cascade from a deleted
user or conversation) sends `pre_delete` for each row of a model that has receivers: Django only
skips the signal on its "fast delete" path, and it never takes that path for a model with
receivers. So one receiver per audit model refuses the deletion, and the surrounding transaction
rolls back whatever the deletion had already done. The foreign keys into the audit are PROTECT as
well, so the admin's delete pages list the audit rows as protected instead of offering to delete
them. The retention purge (`skills_app.audit.retention`) is the only code that lifts the guard,
for the duration of one purge, and it records itself as an AuditEvent that it never deletes.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

from django.db.models import Model, ProtectedError
from django.db.models.signals import pre_delete

from skills_app.models import (
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
    SkillReview,
)

# Conversations with their messages, runs, model calls (usage, cost, the captured requests) and
# events, skill
# invocations (with the injected text), approvals and grants (the decisions), and the trail.
AUDIT_MODELS: tuple[type[Model], ...] = (
    Conversation,
    Message,
    Run,
    RunEvent,
    ModelCall,
    SkillInvocation,
    Approval,
    ConversationGrant,
    AuditEvent,
    # Every permission decision and every step of a skill version's review.
    PermissionDecision,
    SkillReview,
)

_purging: contextvars.ContextVar[bool] = contextvars.ContextVar("audit_purging", default=False)


class AuditDeletionError(ProtectedError):
    """An attempt to delete an audit row outside the retention purge."""


@contextlib.contextmanager
def purge_allowed() -> Iterator[None]:
    """Lift the guard for the retention purge only (never for AuditEvent rows)."""
    token = _purging.set(True)
    try:
        yield
    finally:
        _purging.reset(token)


def _refuse(sender: type[Model], instance: Model, **kwargs: Any) -> None:
    if _purging.get() and sender is not AuditEvent:
        return
    label = sender._meta.verbose_name
    raise AuditDeletionError(
        f"The {label} #{instance.pk} is part of the audit trail and cannot be deleted. A "
        "conversation is deleted for its owner by marking it deleted; a user with audit history "
        "is deactivated instead of deleted; old audit rows leave only through "
        "`manage.py audit purge` (AUDIT_RETENTION_DAYS).",
        {instance},
    )


def install() -> None:
    """Connect the guard to every audit model (called once from the app's ready())."""
    for model in AUDIT_MODELS:
        pre_delete.connect(_refuse, sender=model, dispatch_uid=f"audit-guard-{model.__name__}")
