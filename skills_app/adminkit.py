"""Pieces the feature admins share."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest


def short_digest(digest: str) -> str:
    return digest[:12]


def sentence(text: str, *, name: str = "", capital: bool = True) -> str:
    """A service message as a sentence: a full stop, and a capital unless it starts with `name`."""
    text = text.strip()
    if not text:
        return text
    if capital and not (name and text.startswith(name)):
        text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


class ReadOnlyAdmin(admin.ModelAdmin):
    """Immutable records: viewable, never added, changed or deleted through the admin."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
