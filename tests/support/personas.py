"""The personas' accounts, for the fixtures of tests/conftest.py and for rows shared by a module."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission


def make_alice() -> Any:
    return get_user_model().objects.create_user("alice", password="alice-pass-123")


def make_bob() -> Any:
    return get_user_model().objects.create_user("bob", password="bob-pass-123")


def make_auditor() -> Any:
    """The Auditor role: staff, audit pages, the inspect-injected-content permission."""
    from skills_app.accounts import roles

    user = get_user_model().objects.create_user("audrey", password="audrey-pass-123", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="inspect_injected_content"))
    roles.grant(user, roles.get_role("auditor"))
    return user


def make_admin() -> Any:
    return get_user_model().objects.create_superuser("root", password="root-pass-123")
