"""A thread with a database connection of its own, for work that must not queue behind others.

Django's `sync_to_async` work of a process shares one thread (and its connection): under load a
render, the live text's commits or a heartbeat would wait behind every run's set-up. Each
`DatabaseThread` is one more thread, with its own connection, kept between calls and checked by
Django's `close_old_connections` (settings.py, DATABASES). `Continuity` is how long its queries
have gone through without a break (the sweeps of dead workers judge silence only after that).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.db import DatabaseError, connection

T = TypeVar("T")


class DatabaseThread:
    """One thread with its own database connection, for work that must not queue behind others.

    On an in-memory SQLite database (the tests') it is the process's shared database thread
    instead: a second connection to it would only meet its table locks. A SQLite file gets a
    connection of its own like PostgreSQL (WAL: its readers do not block this writer).
    """

    def __init__(self, name: str) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._shared = connection.vendor == "sqlite" and _in_memory(connection)
        # How long this thread's queries have gone through without a break.
        self.continuity = Continuity()

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        try:
            if self._shared:
                result = await sync_to_async(fn, thread_sensitive=True)(*args, **kwargs)
            else:
                # Channels' wrapper runs Django's `close_old_connections` around the call: the
                # thread's connection is kept, and one an error or a database restart broke is
                # replaced before the call uses it (settings.py, DATABASES).
                call = database_sync_to_async(fn, thread_sensitive=False, executor=self._pool)
                result = await call(*args, **kwargs)
        except DatabaseError:
            self.continuity.failed()
            raise
        self.continuity.reached()
        return result

    async def close(self) -> None:
        """Close the thread's connection and end the thread."""
        try:
            if not self._shared:
                await self.run(_close_connection)
        finally:
            self._pool.shutdown(wait=False)


def _in_memory(database: Any) -> bool:
    return bool(database.is_in_memory_db())


def _close_connection() -> None:
    # Looked up in the thread itself: `connection` is this thread's own connection.
    connection.close()


class Continuity:
    """How long one process has reached the database without a break, on its own clock."""

    def __init__(self) -> None:
        self._since: float | None = None

    def reached(self) -> None:
        """A query went through."""
        if self._since is None:
            self._since = time.monotonic()

    def failed(self) -> None:
        """A query failed: the database (or the way to it) was away."""
        self._since = None

    def seconds(self) -> float:
        """How long the database has answered every query, 0 when the last one failed."""
        return 0.0 if self._since is None else time.monotonic() - self._since


__all__ = ["Continuity", "DatabaseThread"]
