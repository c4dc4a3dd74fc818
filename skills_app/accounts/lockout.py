"""Sign-in lockout (django-axes): its page, the address it counts, lifting it, and the audit; the
check that makes a lock hold for every way in is `policy/barred.py`."""

from __future__ import annotations

import logging
from typing import Any

from axes.handlers.proxy import AxesProxyHandler
from axes.signals import user_locked_out
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from skills_app.models import AuditEvent
from skills_app.policy.barred import lockout_text

logger = logging.getLogger(__name__)


def client_ip(request: HttpRequest) -> str:
    """REMOTE_ADDR only: daphne --proxy-headers set it from the trusted proxy's X-Forwarded-For;
    a header the client sent itself is never believed (it would dodge an address lock)."""
    return str(request.META.get("REMOTE_ADDR") or "")


def lockout_response(
    request: HttpRequest, response: Any = None, credentials: Any = None, **_: Any
) -> HttpResponse:
    """The page a locked-out sign-in gets: the login page with the reason (HTTP 429)."""
    return render(
        request,
        "registration/login.html",
        {"lockout": lockout_text(), "form": None, **sign_in_options()},
        status=429,
    )


def sign_in_options() -> dict[str, Any]:
    """What the login page offers: the identity provider's button, local passwords."""
    return {
        "sso_oidc": bool(settings.SSO_OIDC_ISSUER),
        "sso_saml": bool(settings.SSO_SAML_METADATA_URL),
        "sso_name": settings.SSO_NAME,
        "local_passwords": settings.LOCAL_PASSWORDS,
    }


def is_locked(request: HttpRequest | None, username: str) -> bool:
    """Is this username locked out (for a request from its address, when locks count addresses)?"""
    if not settings.AXES_ENABLED or not username:
        return False
    if request is None:
        request = HttpRequest()
    if not hasattr(request, "axes_ip_address"):
        AxesProxyHandler.update_request(request)
    return bool(AxesProxyHandler.is_locked(request, {"username": username}))


def unlock(username: str, *, actor: Any) -> int:
    """Lift every lockout of `username` (and forget its failures); recorded in the audit."""
    from axes.utils import reset

    from skills_app import trail

    removed = int(reset(username=username) or 0)
    trail.record(
        AuditEvent.LOGIN_UNLOCKED, actor=actor, target=f"user {username}", attempts=removed
    )
    return removed


def _locked_out(
    sender: Any, request: HttpRequest | None, username: str, ip_address: str, **_: Any
) -> None:
    from skills_app import trail

    # axes signals again at every attempt while locked: one row per lockout is enough.
    target = f"user {username}"
    earlier = AuditEvent.objects.filter(action=AuditEvent.LOGIN_LOCKED_OUT, target=target)
    if settings.AXES_COOLOFF_TIME is not None:
        earlier = earlier.filter(created_at__gte=timezone.now() - settings.AXES_COOLOFF_TIME)
    lifted = (
        AuditEvent.objects.filter(action=AuditEvent.LOGIN_UNLOCKED, target=target)
        .order_by("-pk")
        .values_list("pk", flat=True)
        .first()
    )
    if lifted is not None:
        earlier = earlier.filter(pk__gt=lifted)
    if earlier.exists():
        return
    trail.record(
        AuditEvent.LOGIN_LOCKED_OUT,
        actor_name="django-axes",
        target=target,
        username=username,
        ip_address=ip_address,
        failures=settings.AXES_FAILURE_LIMIT,
        locked_by=settings.LOGIN_LOCKOUT_BY,
    )


def install() -> None:
    """Record lockouts in the audit (called once from the app's ready())."""
    user_locked_out.connect(_locked_out, dispatch_uid="skillscope-lockout-audit")
