"""Websockets that cannot reach the database are closed with 4503, and the outage logged once."""

from __future__ import annotations

import logging

from channels.testing import WebsocketCommunicator
from django.db import OperationalError

from skills_app.chat.database_away import DATABASE_AWAY, DatabaseAway
from skills_app.core.outages import Outage


class Database:
    """An inner application that fails as a websocket's connect does while PostgreSQL is away."""

    def __init__(self) -> None:
        self.away = True

    async def __call__(self, scope, receive, send) -> None:
        await receive()  # websocket.connect
        if self.away:
            raise OperationalError('connection failed: connection to server at "127.0.0.1" refused')
        await send({"type": "websocket.accept"})
        await receive()


async def connect(app) -> tuple[bool, dict]:
    tab = WebsocketCommunicator(app, "/ws/conversations/1/")
    connected, _ = await tab.connect(timeout=5)
    message = await tab.receive_output(timeout=5) if connected else {}
    return connected, message


def outage_states(caplog) -> list[str]:
    return [r.state for r in caplog.records if getattr(r, "outage", "") == "the database"]


async def test_each_connect_is_closed_with_4503_and_the_outage_is_logged_once(caplog):
    caplog.set_level(logging.INFO)
    database = Database()
    app = DatabaseAway(database, Outage("the database", logging.getLogger("test"), who="ws"))
    for _ in range(3):
        connected, message = await connect(app)
        # Accepted first: a close before the accept reaches the browser without its code.
        assert connected
        assert message == {"type": "websocket.close", "code": DATABASE_AWAY}
    assert outage_states(caplog) == ["lost"]
    assert sum(r.exc_info is not None for r in caplog.records) == 1

    database.away = False
    tab = WebsocketCommunicator(app, "/ws/conversations/1/")
    assert (await tab.connect(timeout=5))[0]
    await tab.disconnect()
    assert outage_states(caplog) == ["lost", "back"]


async def test_other_errors_are_not_taken_for_an_outage():
    async def broken(scope, receive, send) -> None:
        await receive()
        raise ValueError("a bug")

    app = DatabaseAway(broken, Outage("the database", logging.getLogger("test")))
    tab = WebsocketCommunicator(app, "/ws/conversations/1/")
    try:
        await tab.connect(timeout=5)
    except ValueError:
        pass
    else:
        raise AssertionError("the error was swallowed")
