"""Shared fragments on a page: their forms get the viewer's CSRF token (`chat.controls`)."""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString, mark_safe

from skills_app.chat.controls import with_csrf as _with_csrf

register = template.Library()


@register.filter
def with_csrf(html: str, token: object) -> SafeString:
    """A fragment (already safe HTML) whose forms carry `token`; unchanged without one."""
    if not token:
        return mark_safe(html)
    return _with_csrf(html, str(token))
