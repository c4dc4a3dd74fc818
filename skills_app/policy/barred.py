"""Who may start nothing more right now: a deactivated account, or one locked out after failed
sign-ins (django-axes). Below runs and the features, so an open chat tab, a trigger run and the
sign-in through the identity provider ask the same functions."""

from __future__ import annotations

from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone


def lockout_text() -> str:
    """What a locked-out person reads: for how long, and who can lift the lock sooner."""
    minutes = settings.LOGIN_LOCKOUT_MINUTES
    span = (
        f"for {minutes} minute{'s' if minutes != 1 else ''}"
        if minutes
        else "until an administrator lifts the lock"
    )
    return (
        f"Too many failed sign-ins ({settings.LOGIN_FAILURE_LIMIT}): signing in to this account is "
        f"locked {span}. An administrator can lift it sooner (Users, then the action "
        '"Lift the sign-in lockout").'
    )


def username_locked(username: str) -> bool:
    """Is the account locked whatever the address (a lock by username alone)?"""
    if not settings.AXES_ENABLED or "username" not in settings.AXES_LOCKOUT_PARAMETERS:
        return False
    attempts = AccessAttempt.objects.filter(
        username=username, failures_since_start__gte=settings.AXES_FAILURE_LIMIT
    )
    if settings.AXES_COOLOFF_TIME is not None:
        attempts = attempts.filter(attempt_time__gte=timezone.now() - settings.AXES_COOLOFF_TIME)
    return attempts.exists()


def account_barred(user_id: int) -> str:
    """Why this person may start nothing more right now ("" when they may): deactivated, or
    their account locked out after failed sign-ins. Checked by open chat tabs per action."""
    row = (
        get_user_model()
        .objects.filter(pk=user_id)
        .values_list("is_active", get_user_model().USERNAME_FIELD)
        .first()
    )
    if row is None or not row[0]:
        return "Your account is deactivated: this tab can start nothing more. Ask an administrator."
    if username_locked(row[1]):
        return lockout_text()
    return ""
