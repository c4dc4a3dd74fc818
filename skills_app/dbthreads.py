"""Threads with a database connection of their own, and connections kept healthy in them.

Work that must not queue behind the runs' database work on asgiref's one shared thread gets a
`DatabaseThread`: a worker's liveness and its runs, the live text's journal, the chat's renders.
A thread that serves no requests keeps its connection between calls (a new one costs the
database a process) and replaces it only when a database error left it unusable.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.db import DatabaseError, connection

T = TypeVar("T")


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
                call = functools.partial(with_connection, fn, *args, **kwargs)
                result = await asyncio.get_running_loop().run_in_executor(self._pool, call)
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


def heal_connection(*, check: bool = False) -> None:
    """Replace this thread's connection if a database error left it unusable; keep it otherwise.

    `check`: test it even if no error was seen on it (after an outage noticed elsewhere in the
    process: a connection idle through a database restart fails only when next used).

    Django replaces broken connections only between requests (`close_old_connections`); a
    thread that serves no requests (a worker's, the live text's journal) would otherwise keep a
    connection a database restart killed and fail every call until the process restarts. Unlike
    `close_old_connections` with CONN_MAX_AGE=0, a healthy connection is kept: these threads
    query several times a second and a new connection each time costs the database a process.
    """
    if connection.connection is None or connection.in_atomic_block:
        return
    if connection.errors_occurred or check:
        if connection.is_usable():
            connection.errors_occurred = False
        else:
            connection.close()


def with_connection(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    # A connection broken by a database restart is replaced here instead of failing every call.
    heal_connection()
    try:
        return fn(*args, **kwargs)
    except DatabaseError:
        connection.close()
        raise
