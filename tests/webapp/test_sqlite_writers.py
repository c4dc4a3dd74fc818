"""webapp.sqlite: a SQLite file's writers in one process take turns, the journal's first.

Real threads, each with its own connection to a real SQLite file (WAL, BEGIN IMMEDIATE, as the
settings configure it), through Django's transactions.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connections, transaction

from webapp.sqlite.base import writer_queue

TIMEOUT = 5.0


@pytest.fixture
def file_db(tmp_path: Path, django_db_blocker: Any) -> Iterator[str]:
    """A database alias on a SQLite file with one table, for this test only."""
    alias = f"writers-{uuid.uuid4().hex[:8]}"
    path = tmp_path / "writers.sqlite3"
    connections.settings[alias] = connections.configure_settings(
        {
            "default": connections.settings["default"],
            alias: {
                "ENGINE": "webapp.sqlite",
                "NAME": str(path),
                "OPTIONS": {
                    "timeout": TIMEOUT,
                    "transaction_mode": "IMMEDIATE",
                    "init_command": "PRAGMA journal_mode=WAL;",
                },
            },
        }
    )[alias]
    with django_db_blocker.unblock():
        connections[alias].cursor().execute("CREATE TABLE entry (who TEXT)")
        connections[alias].close()
        yield alias
        connections[alias].close()
    del connections.settings[alias]


def _thread(target: Callable[[], None]) -> threading.Thread:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            target()
        except BaseException as exc:  # re-raised in the test by _join
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.errors = errors  # type: ignore[attr-defined]
    thread.start()
    return thread


def _join(*threads: threading.Thread) -> None:
    for thread in threads:
        thread.join(TIMEOUT * 2)
        assert not thread.is_alive(), "a writer never finished"
        assert not thread.errors, thread.errors  # type: ignore[attr-defined]


def _writer(alias: str, who: str, order: list[str], *, urgent: bool = False) -> None:
    connection = connections[alias]
    connection.urgent_writes = urgent
    try:
        with transaction.atomic(using=alias):
            order.append(who)  # inside the transaction: it holds the write lock now
            connection.cursor().execute("INSERT INTO entry (who) VALUES (%s)", [who])
    finally:
        connection.close()


def _waiting(alias: str, count: int) -> None:
    """Until `count` writers wait for their turn (they block in the queue's condition)."""
    queue = writer_queue(str(connections.settings[alias]["NAME"]))
    deadline = time.monotonic() + TIMEOUT
    while queue.waiting < count:
        assert time.monotonic() < deadline, "the writers did not start waiting"
        time.sleep(0.005)


def test_the_journals_writer_goes_before_writers_that_waited_longer(file_db: str) -> None:
    order: list[str] = []
    holding, release = threading.Event(), threading.Event()

    def holder() -> None:
        connection = connections[file_db]
        try:
            with transaction.atomic(using=file_db):
                connection.cursor().execute("INSERT INTO entry (who) VALUES ('holder')")
                holding.set()
                release.wait(TIMEOUT)
        finally:
            connection.close()

    first = _thread(holder)
    assert holding.wait(TIMEOUT)
    plain = [_thread(lambda i=i: _writer(file_db, f"run-{i}", order)) for i in range(3)]
    _waiting(file_db, 3)
    urgent = _thread(lambda: _writer(file_db, "journal", order, urgent=True))
    _waiting(file_db, 4)
    release.set()
    _join(first, urgent, *plain)
    assert order[0] == "journal"
    assert sorted(order[1:]) == ["run-0", "run-1", "run-2"]
    rows = connections[file_db].cursor().execute("SELECT count(*) FROM entry").fetchone()
    assert rows == (5,)


@pytest.mark.parametrize("ending", ["rollback", "close"])
def test_a_transaction_that_ends_without_a_commit_gives_its_turn_back(
    file_db: str, ending: str
) -> None:
    def failing() -> None:
        connection = connections[file_db]
        if ending == "rollback":
            with pytest.raises(ValueError), transaction.atomic(using=file_db):
                connection.cursor().execute("INSERT INTO entry (who) VALUES ('lost')")
                raise ValueError("the work failed")
        else:
            with transaction.atomic(using=file_db):
                connection.cursor().execute("INSERT INTO entry (who) VALUES ('lost')")
                connection.close()  # a connection dropped mid-transaction

    _join(_thread(failing))
    order: list[str] = []
    started = time.monotonic()
    _join(_thread(lambda: _writer(file_db, "next", order)))
    # Without its turn back, the next writer would wait out the whole timeout first.
    assert time.monotonic() - started < TIMEOUT / 2
    assert order == ["next"]
    rows = connections[file_db].cursor().execute("SELECT who FROM entry").fetchall()
    assert rows == [("next",)]


def test_a_turn_not_given_in_time_is_not_waited_for_longer(file_db: str) -> None:
    """A turn that is never given back (a bug) costs a writer the timeout, not the process."""
    queue = writer_queue(str(connections.settings[file_db]["NAME"]))
    assert queue.take(urgent=False, timeout=0)  # taken and never given back
    connections.settings[file_db]["OPTIONS"]["timeout"] = 0.3
    try:
        order: list[str] = []
        started = time.monotonic()
        _join(_thread(lambda: _writer(file_db, "late", order)))
        assert 0.25 < time.monotonic() - started < TIMEOUT
        assert order == ["late"]  # SQLite's own lock was free: the write went through
    finally:
        queue.give_back()


def test_an_in_memory_database_has_no_queue(db: Any) -> None:
    connection = connections["default"]
    assert connection.vendor == "sqlite" and connection.is_in_memory_db()
    with transaction.atomic():
        assert connection._turn is None  # type: ignore[attr-defined]


def test_the_journals_database_thread_marks_its_connection_urgent() -> None:
    from django.db import connection

    from skills_app.runs import liveness

    for urgent in (True, False):
        thread = liveness.DatabaseThread("writers-test", urgent=urgent)
        try:
            marked = thread._pool.submit(lambda: connection.urgent_writes).result(TIMEOUT)
        finally:
            thread._pool.shutdown()
        assert marked is urgent
