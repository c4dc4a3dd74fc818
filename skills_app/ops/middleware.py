"""Answer the probes before host validation and the HTTPS redirect.

A load balancer or systemd asks each process directly (`http://127.0.0.1:8001/readyz`), with its
own Host header and over plain HTTP: through the ordinary middleware that is a 400
(ALLOWED_HOSTS) or a 301 (SECURE_SSL_REDIRECT). Placed first in MIDDLEWARE, this answers GET
and HEAD on exactly the routes of `skills_app.ops.urls` and hands every other request on
untouched. The probes build no URL from the Host header and reveal nothing, so skipping those
checks for them is safe.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import async_to_sync, iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponseBase
from django.urls import Resolver404, resolve

PROBE_URLCONF = "skills_app.ops.urls"


def _probe_view(request: HttpRequest) -> Callable[..., Awaitable[HttpResponseBase]] | None:
    if request.method not in ("GET", "HEAD"):
        return None  # probes only read; anything else takes the ordinary path (CSRF, then 405)
    try:
        return resolve(request.path_info, urlconf=PROBE_URLCONF).func
    except Resolver404:
        return None


class ProbeMiddleware:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self._acall(request)
        view = _probe_view(request)
        if view is None:
            return self.get_response(request)
        return async_to_sync(view)(request)

    async def _acall(self, request: HttpRequest) -> HttpResponseBase:
        view = _probe_view(request)
        if view is None:
            response: HttpResponseBase = await self.get_response(request)
            return response
        return await view(request)
