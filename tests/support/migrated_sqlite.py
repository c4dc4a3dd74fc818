"""A SQLite database migrated once per test run, copied for each test whose processes need their own.

Migrating a new SQLite file costs about 9 s of CPU. The tests that start a Django process on a
database of its own (a daphne, the budget race's tool) copy one file instead, which
`manage.py migrate` made in a child process as a new install would. Under pytest-xdist the
workers of one run share the file: the first to need it migrates it, under a lock, and the others
wait for it.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO

__all__ = ["copy_database", "migrated_template"]


def migrated_template(folder: Path) -> Path:
    """The migrated database in `folder`, made by the first caller (any process) that asks."""
    folder.mkdir(parents=True, exist_ok=True)
    template = folder / "migrated.sqlite3"
    with (folder / "migrated.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not template.exists():
            _migrate(folder, template)
    return template


def copy_database(template: Path, destination: Path) -> None:
    """A consistent copy of `template` at `destination` (SQLite's backup, WAL pages included)."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    source, target = sqlite3.connect(template), sqlite3.connect(destination)
    try:
        source.backup(target)
    finally:
        source.close()
        target.close()


def _migrate(folder: Path, template: Path) -> None:
    # Made under another name and renamed once complete: a failed migration leaves no template.
    partial = folder / "migrating.sqlite3"
    partial.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "SQLITE_PATH")}
    env.update(SKILLSCOPE_VAR_DIR=str(folder / "var"), SQLITE_PATH=str(partial))
    done = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "--verbosity", "0"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"migrating the template database failed:\n{done.stderr[-3000:]}")
    copy_database(partial, template)
