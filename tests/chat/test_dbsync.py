"""The consumers' database calls keep a healthy connection and replace a broken one (`dbsync`).

Channels' `database_sync_to_async` closed the shared thread's connection around every call; a
new connection costs a millisecond of CPU on SQLite and a server process on PostgreSQL.

The tests' in-memory database never really closes a connection (Django ignores `close` there:
it would lose the database), so the calls run in a process of its own on a SQLite file, as the
app runs by default; Django's `connection_created` signal counts the connections opened.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


SCRIPT = """
import asyncio, json
import django
django.setup()
from django.db import DatabaseError, connection, transaction
from django.db.backends.signals import connection_created
from skills_app.runs.dbsync import database_sync_to_async

opened = []
connection_created.connect(lambda sender, connection, **kw: opened.append(1), weak=False)

def raw_id():
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return len(opened)

def break_it():
    connection.connection.close()  # the database end went away under Django
    raw_id()

def make_table():
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE half (x)")

def leave_open():
    transaction.set_autocommit(False)
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO half VALUES (1)")
    return len(opened)

def state():
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM half")
        rows = cursor.fetchone()[0]
    return len(opened), connection.get_autocommit(), rows

async def main():
    out = {}
    first = await database_sync_to_async(raw_id)()
    for _ in range(5):
        out["kept"] = await database_sync_to_async(raw_id)() == first
    try:
        await database_sync_to_async(break_it)()
        out["broke"] = "no error"
    except DatabaseError as exc:
        out["broke"] = type(exc).__name__
    after = await database_sync_to_async(raw_id)()
    out["replaced_after_error"] = after != first
    await database_sync_to_async(make_table)()
    opened = await database_sync_to_async(leave_open)()
    raw, autocommit, rows = await database_sync_to_async(state)()
    out["replaced_after_open_transaction"] = raw != opened
    out["autocommit"] = autocommit
    out["rolled_back"] = rows == 0
    print(json.dumps(out))

asyncio.run(main())
"""


def test_one_connection_serves_call_after_call_but_not_broken_or_mid_transaction(
    tmp_path: Path,
) -> None:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "webapp.settings",
        "SKILLSCOPE_VAR_DIR": str(tmp_path),
        "SQLITE_PATH": str(tmp_path / "db.sqlite3"),
    }
    env.pop("DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "kept": True,
        "broke": "ProgrammingError",
        "replaced_after_error": True,
        "replaced_after_open_transaction": True,
        "autocommit": True,
        "rolled_back": True,
    }
