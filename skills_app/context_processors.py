from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest

from skills_app.core.tools.sandbox import describe_sandbox


def skillscope(request: HttpRequest) -> dict[str, Any]:
    """Facts pages show: whether answers come from the offline demo model, and (evaluated only
    where a template asks, e.g. the admin home) whether commands run sandboxed."""
    return {
        "demo_model": not settings.ANTHROPIC_API_KEY,
        "sandbox_status": lambda: describe_sandbox(settings.SANDBOX),
    }
