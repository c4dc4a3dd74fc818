"""Times as a person reads them: stored ISO strings made datetimes, shown in their time zone."""

from __future__ import annotations

from datetime import UTC, datetime

from django import template
from django.utils import timezone

register = template.Library()


@register.filter
def as_datetime(value: object) -> datetime | None:
    """An ISO 8601 string (as kept in a row's meta) as an aware datetime; None if it is not one."""
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed, UTC)
