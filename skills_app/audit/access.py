"""Who may open the audit pages, and who may replay a stored call in the rule tester."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

from skills_app.accounts.roles import AUDIT_PERMISSION

# The rule tester lives in the admin's permission-rule pages.
TESTER_PERMISSION = "skills_app.view_permissionrule"


def can_view_audit(user: Any) -> bool:
    """The Auditor and Administrator roles (and superusers) may open the audit pages."""
    return bool(user is not None and user.is_authenticated and user.has_perm(AUDIT_PERMISSION))


def require_audit_viewer(request: HttpRequest) -> None:
    """PermissionDenied, saying what to ask for, unless the user may view the audit."""
    if not can_view_audit(request.user):
        raise PermissionDenied(
            "The audit is for auditors; ask an administrator for the Auditor role."
        )


def can_replay(user: Any) -> bool:
    """May open the rule tester (in the admin) with a call from the audit."""
    return bool(can_view_audit(user) and user.is_staff and user.has_perm(TESTER_PERMISSION))
