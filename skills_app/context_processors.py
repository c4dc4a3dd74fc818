from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest


def skillscope(request: HttpRequest) -> dict[str, Any]:
    """Facts every page shows: whether answers come from the offline demo model."""
    return {"demo_model": not settings.ANTHROPIC_API_KEY}
