"""`ticks`: plain words with `code` spans shown as code (the manifest's words use backticks)."""

from __future__ import annotations

import re

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

_TICKED = re.compile(r"`([^`\n]+)`")


@register.filter
def ticks(text: object) -> SafeString:
    """The text escaped, each `span` in backticks as <code>span</code>."""
    escaped = str(escape(str(text)))
    # Escaping never makes or removes a backtick, so the spans are found in the escaped text.
    return mark_safe(_TICKED.sub(r"<code>\1</code>", escaped))  # noqa: S308
