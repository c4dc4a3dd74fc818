"""Database connections on SQLite, the default: the consumers' thread and a `DatabaseThread`
keep one connection call after call (a new one costs a millisecond of CPU: Django registers its
SQL functions on each), and an HTTP request's thread, which ends with the request, does not leave
its connection open (tests/support/connection_probe.py, in a process of its own on a migrated
SQLite file, as the app runs by default; the tests' in-memory database is never closed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.migrated_sqlite import copy_database
from tests.support.paths import REPO


def test_long_lived_threads_keep_one_connection_and_requests_close_theirs(
    migrated_sqlite: Path, tmp_path: Path
) -> None:
    database = tmp_path / "db.sqlite3"
    copy_database(migrated_sqlite, database)
    env = {**os.environ, "SKILLSCOPE_VAR_DIR": str(tmp_path), "SQLITE_PATH": str(database)}
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.connection_probe", "--requests", "20"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "shared_thread": {"kept": True},
        "database_thread": {"kept": True},
        "threads_opened": 2,
        "statuses": [302],
        "http_opened": 20,
        "left_open": 0,
    }
