"""Fixtures of the security tests."""

from __future__ import annotations

import pytest

from tests.security.test_security_urls import World, build_world


@pytest.fixture
def world(alice, bob, auditor, tmp_path) -> World:
    """Every kind of object, owned by alice, with a marker in every hidden place (`build_world`)."""
    return build_world(alice, bob, auditor, tmp_path)
