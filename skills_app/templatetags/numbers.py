"""Template filters for figures: token counts with thousands separators."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()


@register.filter
def thousands(value: Any) -> str:
    """12345 -> "12,345"; anything that is not a whole number is shown as it is."""
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return "" if value is None else str(value)
