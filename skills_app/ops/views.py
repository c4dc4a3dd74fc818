"""The two probes: /healthz (the process answers) and /readyz (it can serve a whole chat).

No authentication and nothing sensitive: a fixed status word per check. They are reached before
host validation and the HTTPS redirect (see `middleware.ProbeMiddleware`), so a load balancer or
systemd can ask a process directly by its address.
"""

from __future__ import annotations

from collections.abc import Mapping

from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from ..runs.recovery import ensure_sweeping
from .health import readiness


def _json(body: Mapping[str, object], status: int = 200) -> JsonResponse:
    response = JsonResponse(body, status=status)
    response["X-Content-Type-Options"] = "nosniff"
    return response


@never_cache
@require_safe
async def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness: answered from the event loop, touching neither the database nor the channel layer."""
    return _json({"status": "ok"})


@never_cache
@require_safe
async def readyz(request: HttpRequest) -> JsonResponse:
    """Readiness: 200 when every check passes, 503 (with each check's status) otherwise."""
    # A process a load balancer probes watches for dead workers even before a browser connects.
    ensure_sweeping()
    answer = await readiness()
    body = {"status": "ready" if answer.ready else "not ready", "checks": answer.checks}
    response = _json(body, status=200 if answer.ready else 503)
    # A 503 here is the answer a load balancer asked for, not a server error: Django would log
    # each one as an ERROR. The checks log what they find when it changes (`health`).
    response._has_been_logged = True  # type: ignore[attr-defined]
    return response
