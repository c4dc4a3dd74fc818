"""Request types for views: what the middleware and `login_required` guarantee, for mypy."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    """A request that passed django-htmx's middleware (installed for every request)."""

    htmx: HtmxDetails


class AuthedHttpRequest(HtmxHttpRequest):
    """A request to a `login_required` view: its user is a signed-in `User`."""

    user: User  # narrowed from User | AnonymousUser by login_required
