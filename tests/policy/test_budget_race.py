"""Parallel requests cannot walk past a budget: the reservation is atomic in the database.

Each test runs the race in a child process with a real database file of its own (a copy of the
run's migrated SQLite, in WAL, or PostgreSQL), threads with their own connections released by a
barrier at the same moment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from decimal import Decimal

from tests.support.migrated_sqlite import copy_database
from tests.support.paths import REPO

ROOT = REPO


def _race(env: dict[str, str], threads: int, amount: str, limit: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "tests.policy.race_tool", str(threads), amount, limit],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_sixteen_reservations_at_once_on_sqlite_fit_exactly_under_the_limit(
    tmp_path, migrated_sqlite
):
    copy_database(migrated_sqlite, tmp_path / "race.sqlite3")
    env = {
        **os.environ,
        "SKILLSCOPE_VAR_DIR": str(tmp_path / "var"),
        "SQLITE_PATH": str(tmp_path / "race.sqlite3"),
        "DATABASE_URL": "",
    }
    result = _race(env, 16, "1.50", "6.00")
    assert result["errors"] == []
    assert result["vendor"] == "sqlite"
    # $6.00 holds four reservations of $1.50 and not one more, however they arrive.
    assert result["granted"] == 4 and result["refused"] == 12
    assert Decimal(result["reserved"]) == Decimal("6.00")
    assert "daily spending limit of $6.00 is reached" in result["sample_refusal"]
