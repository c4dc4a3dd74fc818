"""Parallel reservations against one budget on PostgreSQL (the SQLite race: tests/policy/test_budget_race.py)."""

from __future__ import annotations

import os
from decimal import Decimal

import pytest

from tests.policy.test_budget_race import _race

pytestmark = pytest.mark.multiprocess


def test_sixteen_reservations_at_once_on_postgresql_fit_exactly_under_the_limit(migrated, tmp_path):
    env = {**os.environ, "DATABASE_URL": migrated.url, "SKILLSCOPE_VAR_DIR": str(tmp_path)}
    result = _race(env, 16, "1.50", "6.00")
    assert result["errors"] == []
    assert result["vendor"] == "postgresql"
    assert result["granted"] == 4 and result["refused"] == 12
    assert Decimal(result["reserved"]) == Decimal("6.00")
