"""`database_sync_to_async` for the websocket consumers: a healthy connection is kept.

Channels' own closes the thread's database connection before and after every call (Django's
CONN_MAX_AGE=0 semantics, meant for one request per connection). The consumers' calls run on
asgiref's one shared thread, the same thread the runs' database work uses, so every frame a tab
sent closed that thread's connection and the next call of any run opened a new one: 1 ms of
CPU on SQLite (Django registers its SQL functions on every new connection), a new server process
on PostgreSQL. About 700 new connections for 100 runs starting at once (bench/PROFILE.md).

Here the connection is kept and checked instead, as Django checks one at the end of a request
minus the age limit: one left outside autocommit (a transaction left open) is closed; one a
database error was seen on, and before a call any one, is tested (free on SQLite, one
`SELECT 1` round trip on PostgreSQL) and replaced if it no longer answers, so a connection a
database restart broke is replaced before it can fail a call.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import SyncToAsync
from django.db import DatabaseError, connection


def keep_or_replace_connection(*, check: bool) -> None:
    """Close this thread's connection if it is outside autocommit or (tested when `check`, or
    after an error) no longer usable; keep it otherwise."""
    if connection.connection is None:
        return
    if connection.get_autocommit() != connection.settings_dict["AUTOCOMMIT"]:
        connection.close()
        return
    if check or connection.errors_occurred:
        if connection.is_usable():
            connection.errors_occurred = False
        else:
            connection.close()


class DatabaseSyncToAsync(SyncToAsync[..., Any]):
    """SyncToAsync that checks the thread's connection around each call (see the module)."""

    def thread_handler(self, loop: Any, *args: Any, **kwargs: Any) -> Any:
        keep_or_replace_connection(check=True)
        try:
            return super().thread_handler(loop, *args, **kwargs)  # type: ignore[no-untyped-call]
        except DatabaseError:
            # SQLite's `is_usable` is always true: a connection an error broke is not kept.
            connection.close()
            raise
        finally:
            keep_or_replace_connection(check=False)


database_sync_to_async = DatabaseSyncToAsync

__all__ = ["database_sync_to_async", "keep_or_replace_connection"]
