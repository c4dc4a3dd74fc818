"""Websockets refused while the database is away: a close code the page understands, one log line.

Without it, every tab that tries to connect during a PostgreSQL outage (the session, the user
and the conversation are read from the database) ends in daphne's "Exception inside
application" with a full traceback, once per attempt, and the tab sees a bare 1006. Here the
socket is accepted and closed at once with DATABASE_AWAY (a close before the accept would
reach the browser as a refused handshake, with no code); chat.js says "The server cannot reach
its database; retrying…" and keeps reconnecting with its backoff. The outage is logged once
(`core.outages`), and once more when a socket is accepted again.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, cast

from asgiref.typing import ASGI3Application, ASGIReceiveCallable, ASGISendCallable, ASGISendEvent
from django.db import InterfaceError, OperationalError

from skills_app.core.outages import Outage

logger = logging.getLogger(__name__)

# 4000-4999 are the application's own close codes; 503 as in "Service Unavailable".
DATABASE_AWAY = 4503

if TYPE_CHECKING:
    from channels.consumer import _ChannelScope
    from channels.utils import _ChannelApplication

OUTAGE = Outage("the database", logger, who="websocket connections")


class DatabaseAway:
    """ASGI middleware for websockets: a database error closes the socket with DATABASE_AWAY."""

    def __init__(self, application: _ChannelApplication, outage: Outage = OUTAGE) -> None:
        # As webapp/wsorigin.py: Channels' stacks are ASGI 3 applications.
        self.application = cast("ASGI3Application", application)
        self.outage = outage

    async def __call__(
        self, scope: _ChannelScope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        state = {"accepted": False, "closed": False}

        async def watched(message: ASGISendEvent) -> None:
            if message["type"] == "websocket.accept":
                state["accepted"] = True
                self.outage.recovered()
            elif message["type"] == "websocket.close":
                state["closed"] = True
            await send(message)

        try:
            await self.application(cast(Any, scope), receive, watched)
        except (OperationalError, InterfaceError) as error:
            self.outage.failed(error)
            if state["closed"]:
                return
            if not state["accepted"]:
                await send(cast(Any, {"type": "websocket.accept"}))
            await send(cast(Any, {"type": "websocket.close", "code": DATABASE_AWAY}))
