"""A person's own settings: the time zone times are shown in, the colour theme, and the first
screen's introduction.

The time zone is detected by the browser (`static/skillscope/timezone.js`) and stored per person,
so pages rendered on the server and fragments the script localises use the same zone. Only names
the server's zoneinfo knows are taken: anything else is refused with a message and changes nothing.

The theme is rendered by the server on `<html data-theme>`, so a page is drawn in its colours from
the first paint; the menu's form posts it (204 for htmx, else a redirect back to the page).
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Callable
from functools import lru_cache

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from skills_app.models import Theme, UserPreference

SESSION_KEY = "time_zone"
MAX_ZONE_CHARS = 64


class TimeZoneError(ValueError):
    """Not a time zone this server knows; the message says what to send instead."""


@lru_cache(maxsize=1)
def _zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


def checked_zone(name: object) -> str:
    """`name` when it is an IANA time zone this server knows, else TimeZoneError."""
    if not isinstance(name, str) or not name or len(name) > MAX_ZONE_CHARS or name not in _zones():
        shown = repr(name)[:80] if isinstance(name, str) else "nothing"
        raise TimeZoneError(
            f"{shown} is not a time zone this server knows. Send an IANA name such as "
            "Europe/Berlin or America/New_York (what the browser reports)."
        )
    return name


def zone_of(user_id: int) -> str:
    """The person's stored time zone name ("" when they have none)."""
    stored = (
        UserPreference.objects.filter(user_id=user_id).values_list("time_zone", flat=True).first()
    )
    return stored or ""


def intro_dismissed(user_id: int) -> bool:
    return UserPreference.objects.filter(user_id=user_id, intro_dismissed_at__isnull=False).exists()


class UserTimeZoneMiddleware:
    """Pages are rendered in the signed-in person's time zone (kept in the session after the
    first look-up, so a request costs no query)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        name = ""
        if request.user.is_authenticated:
            if SESSION_KEY not in request.session:
                request.session[SESSION_KEY] = zone_of(request.user.pk)
            name = request.session.get(SESSION_KEY) or ""
        if name in _zones():
            timezone.activate(zoneinfo.ZoneInfo(name))
        else:
            timezone.deactivate()
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()


@login_required
@require_POST
def set_time_zone(request: HttpRequest) -> HttpResponse:
    """Store the browser's time zone for this person (204), or say why it was refused (400)."""
    try:
        name = checked_zone(request.POST.get("time_zone"))
    except TimeZoneError as exc:
        return HttpResponse(str(exc), status=400, content_type="text/plain; charset=utf-8")
    UserPreference.objects.update_or_create(user=request.user, defaults={"time_zone": name})
    request.session[SESSION_KEY] = name
    return HttpResponse(status=204)


def theme_of(request: HttpRequest) -> str:
    """The signed-in person's theme, else system. Read from the database (one row by key, once per
    request) rather than kept in the session, so a choice made on one device reaches the others."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return Theme.SYSTEM.value
    cached = getattr(request, "skillscope_theme", None)
    if cached is None:
        stored = UserPreference.objects.filter(user_id=user.pk).values_list("theme", flat=True)
        cached = stored.first() or Theme.SYSTEM.value
        request.skillscope_theme = cached  # type: ignore[attr-defined]
    return cached if cached in Theme.values else Theme.SYSTEM.value


def _back(request: HttpRequest) -> str:
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(target, {request.get_host()}, request.is_secure()):
        return "/"
    return target


@login_required
@require_POST
def set_theme(request: HttpRequest) -> HttpResponse:
    """Store this person's theme: 204 for htmx (the script already switched), else back to the page."""
    theme = request.POST.get("theme", "")
    if theme not in Theme.values:
        shown = repr(theme[:40]) if theme else "nothing"
        return HttpResponse(
            f"{shown} is not a theme. Choose one of: " + ", ".join(Theme.values) + ".",
            status=400,
            content_type="text/plain; charset=utf-8",
        )
    UserPreference.objects.update_or_create(user=request.user, defaults={"theme": theme})
    if request.headers.get("HX-Request"):
        return HttpResponse(status=204)
    return redirect(_back(request))


@login_required
@require_POST
def dismiss_intro(request: HttpRequest) -> HttpResponse:
    """The first screen's introduction is not shown again; back to the page it was closed on."""
    UserPreference.objects.update_or_create(
        user=request.user, defaults={"intro_dismissed_at": timezone.now()}
    )
    if request.headers.get("HX-Request"):
        return HttpResponse(status=204)
    return redirect(_back(request))
