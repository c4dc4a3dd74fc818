"""Fixtures of the security tests."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.test import override_settings

from tests.security.test_security_urls import World, build_world
from tests.support import personas
from tests.support.shared_db import module_transaction, session_of


@dataclass(frozen=True, slots=True)
class SharedWorld:
    world: World
    sessions: dict[str, str]  # persona ("owner", "other", "staff", "admin") -> session cookie
    workspaces: Path


@pytest.fixture(scope="module")
def shared_world(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[SharedWorld]:
    """One world per module, with a signed-in session per persona: the tests only read it, and
    what one of them writes is rolled back after it (tests/support/shared_db.py)."""
    root = tmp_path_factory.mktemp("world")

    def build() -> SharedWorld:
        alice, bob, auditor = personas.make_alice(), personas.make_bob(), personas.make_auditor()
        with override_settings(WORKSPACE_ROOT=root / "workspaces", MEDIA_ROOT=root / "media"):
            world = build_world(alice, bob, auditor, root)
        world.users["admin"] = personas.make_admin()
        sessions = {persona: session_of(user) for persona, user in world.users.items()}
        return SharedWorld(world, sessions, root / "workspaces")

    with module_transaction(django_db_blocker, build) as shared:
        yield shared


@pytest.fixture
def world(shared_world, settings) -> World:
    """Every kind of object, owned by alice, with a marker in every hidden place (`build_world`),
    made once per module; the test sees the world's workspace files."""
    settings.WORKSPACE_ROOT = shared_world.workspaces
    return shared_world.world
