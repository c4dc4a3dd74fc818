"""Template filters of the trigger-test pages."""

from __future__ import annotations

from typing import Any

from django import template

from skills_app.core.triggers.metrics import percent as _percent

register = template.Library()


@register.filter
def percent(value: Any) -> str:
    """0.833 -> "83 %"; None -> "—" (a ratio with nothing to divide by)."""
    return _percent(value if isinstance(value, float | int) else None)


@register.filter
def rate_of(outcome: Any) -> str:
    """A query's trigger rate as "2/3"."""
    return f"{outcome.triggered}/{outcome.attempts}"
