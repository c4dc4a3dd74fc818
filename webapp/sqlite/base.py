"""Django's SQLite backend, with this process's writers taking turns in a queue of its own.

SQLite lets one connection write at a time. A connection that finds the write lock taken waits
in SQLite's busy handler, which sleeps and tries again: 1, 2, 5, 10, 15, 20, 25 ms and longer
between tries. While 100 runs started at once (each run's setup is a series of short write
transactions on the shared database thread, back to back), the live text's journal, whose
commit is 1 ms of work, found the lock taken at every try and waited 58-182 ms; every frame of
every streaming run waits for that commit (bench/PROFILE.md, 2026-12-02).

Here a transaction first takes its turn in a queue per database file, then asks SQLite for the
lock (BEGIN IMMEDIATE, settings.py), and gives the turn back when it commits, rolls back or
closes. A writer waiting for its turn is woken the moment the lock is free, and a connection
marked `urgent_writes` (the journal's) goes before every writer still waiting. Other processes
and statements outside a transaction do not take turns: SQLite's busy handler still orders
them, as it did before. An in-memory database (the tests') has one connection and no queue.
A turn not given within the connection's timeout is not waited for longer: the transaction
then asks SQLite as it would have without the queue.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from django.db.backends.sqlite3 import base


class WriterQueue:
    """Turns at one database file's write lock: urgent writers first, then the others."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._taken = False
        self._urgent_waiting = 0
        self.waiting = 0  # writers waiting for their turn now

    def take(self, *, urgent: bool, timeout: float) -> bool:
        """Wait for the turn; False when `timeout` seconds passed without it."""
        deadline = time.monotonic() + timeout
        with self._changed:
            if urgent:
                self._urgent_waiting += 1
            self.waiting += 1
            try:
                while self._taken or (not urgent and self._urgent_waiting):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._changed.wait(left)
                self._taken = True
                return True
            finally:
                self.waiting -= 1
                if urgent:
                    self._urgent_waiting -= 1
                    if not self._urgent_waiting:
                        # The others may go again (one that timed out leaves a turn behind).
                        self._changed.notify_all()

    def give_back(self) -> None:
        with self._changed:
            self._taken = False
            self._changed.notify_all()


_QUEUES: dict[str, WriterQueue] = {}
_QUEUES_LOCK = threading.Lock()


def writer_queue(name: str) -> WriterQueue:
    """The queue of one database file (every connection to it in this process shares it)."""
    with _QUEUES_LOCK:
        return _QUEUES.setdefault(name, WriterQueue())


# django-stubs leaves out the private methods of the backends this class extends (the ones
# Django's own backends override): the `type: ignore[misc]` below are for those calls.
class DatabaseWrapper(base.DatabaseWrapper):
    # Set on a connection whose transactions must not wait behind the others (the journal's).
    urgent_writes = False
    _turn: WriterQueue | None = None

    def _start_transaction_under_autocommit(self) -> None:
        if self._turn is None and not self.is_in_memory_db():
            queue = writer_queue(str(self.settings_dict["NAME"]))
            timeout = float(self.settings_dict.get("OPTIONS", {}).get("timeout", 5))
            if queue.take(urgent=self.urgent_writes, timeout=timeout):
                self._turn = queue
        try:
            super()._start_transaction_under_autocommit()  # type: ignore[misc]
        except BaseException:
            self._give_back()
            raise

    def _give_back(self) -> None:
        turn, self._turn = self._turn, None
        if turn is not None:
            turn.give_back()

    def _commit(self) -> Any:
        try:
            return super()._commit()  # type: ignore[misc]
        finally:
            self._give_back()

    def _rollback(self) -> Any:
        try:
            return super()._rollback()  # type: ignore[misc]
        finally:
            self._give_back()

    def _close(self) -> Any:
        try:
            return super()._close()  # type: ignore[misc]
        finally:
            self._give_back()
