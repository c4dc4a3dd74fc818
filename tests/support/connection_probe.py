"""Run in a process of its own (`python -m tests.support.connection_probe`): what becomes of the
database connections of the app's threads, printed as one JSON line.

- `kept`: the consumers' calls (Channels' `database_sync_to_async`, on asgiref's shared thread)
  and a `DatabaseThread`'s calls each open one connection and keep it, call after call;
- `replaced` (PostgreSQL only, with `--kill`): after the server ended a kept connection (as a
  restart does), the next call on that thread answers on a new one instead of failing;
- `left_open`: how many connections HTTP requests through `webapp.asgi` leave open once they have
  ended (each request runs on a thread of its own that ends with it). The connections are held
  here, so one the app did not close stays open instead of waiting for the garbage collector.

Settings come from the environment, as the app reads them (DATABASE_URL or SQLITE_PATH).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from channels.db import database_sync_to_async
from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created

from webapp.asgi import application

opened: list[BaseDatabaseWrapper] = []


def _count(sender: Any, connection: BaseDatabaseWrapper, **_: Any) -> None:
    opened.append(connection)


connection_created.connect(_count, weak=False)


def session_id() -> object:
    """Which connection this thread queries on: the server's process id, or the SQLite handle."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_backend_pid()")
            return cursor.fetchone()[0]
        cursor.execute("SELECT 1")
    return id(connection.connection)


def end_session(pid: object) -> None:
    """End a server process from outside, as a PostgreSQL restart ends them all."""
    import psycopg

    settings = connection.settings_dict
    with psycopg.connect(
        host=settings["HOST"],
        port=settings["PORT"],
        user=settings["USER"],
        dbname=settings["NAME"],
        autocommit=True,
    ) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])


async def get(path: str) -> int:
    """One GET through the ASGI app with a session cookie, so the request reads the database."""
    incoming: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    incoming.put_nowait({"type": "http.request", "body": b"", "more_body": False})
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"localhost"), (b"cookie", b"sessionid=nosuchsession")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    await application(scope, incoming.get, send)  # type: ignore[arg-type]
    return int(sent[0]["status"])


async def calls_on(run: Any, kill: bool) -> dict[str, object]:
    first = await run(session_id)
    again = [await run(session_id) for _ in range(5)]
    out: dict[str, object] = {"kept": again == [first] * 5}
    if kill:
        await asyncio.to_thread(end_session, first)
        try:
            out["replaced"] = await run(session_id) != first
        except Exception as exc:  # what a call met on the dead connection
            out["replaced"] = type(exc).__name__
    return out


async def main(kill: bool, requests: int) -> dict[str, object]:
    from skills_app.database_thread import DatabaseThread  # once webapp.asgi has set Django up

    before = len(opened)
    shared = await calls_on(lambda fn: database_sync_to_async(fn)(), kill)
    thread = DatabaseThread("probe")
    try:
        own = await calls_on(thread.run, kill)
    finally:
        await thread.close()
    threads_opened = len(opened) - before
    statuses = set()
    http_from = len(opened)
    for _ in range(requests // 5):
        statuses.update(await asyncio.gather(*(get("/") for _ in range(5))))
    http = opened[http_from:]
    return {
        "shared_thread": shared,
        "database_thread": own,
        "threads_opened": threads_opened,
        "statuses": sorted(statuses),
        "http_opened": len(http),
        "left_open": sum(1 for wrapper in http if wrapper.connection is not None),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--kill", action="store_true")
    parser.add_argument("--requests", type=int, default=50)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.kill, args.requests))))
