"""The operator page (staff): workers alive, runs queued and running, the queue's age, event rate.

It refreshes itself every few seconds (htmx polls the same view for the `_status` partial).
It names workers and counts runs; it shows no conversation, title or message.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from skills_app.http import AuthedHttpRequest

from . import snapshot

REFRESH_SECONDS = 5


@never_cache
@login_required
@require_GET
def operator_status(request: AuthedHttpRequest) -> HttpResponse:
    """The page, or (for htmx's poll) only its figures."""
    if not request.user.is_staff:
        raise PermissionDenied("The operator page is for staff.")
    context = {"snap": snapshot.take(), "refresh": REFRESH_SECONDS}
    template = "skills_app/ops/_status.html" if request.htmx else "skills_app/ops/status.html"
    return render(request, template, context)
