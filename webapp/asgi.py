"""ASGI entry point: HTTP through Django, websockets through Channels."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import logging
import os
import sys

from django.core.asgi import get_asgi_application
from django.core.signals import request_finished
from django.db import connections

from webapp.configerror import exit_on_config_error

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

# Build the Django app first so models are ready before the consumers are imported.
# A settings error stops the server with status 78, which the systemd units do not restart.
with exit_on_config_error():
    django_asgi_app = get_asgi_application()


def close_request_connections(**_: object) -> None:
    """Close the connections of the thread that served an HTTP request (it ends with the request)."""
    connections.close_all()


# Sent when the response closes, on the request's own thread (settings.py, DATABASES).
request_finished.connect(close_request_connections, dispatch_uid="skillscope-request-connections")

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ChannelNameRouter, ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402

from skills_app.chat.database_away import DatabaseAway  # noqa: E402
from skills_app.core.llm import load_sdk  # noqa: E402
from skills_app.routing import channel_routes, websocket_urlpatterns  # noqa: E402
from webapp.wsorigin import SameOriginValidator  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        # Exact scheme, host and port, as Django's CSRF check decides (webapp/wsorigin.py); a
        # database that is away closes the socket with a code the page understands.
        "websocket": SameOriginValidator(
            DatabaseAway(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))
        ),
        "channel": ChannelNameRouter(channel_routes),
    }
)


GIVE_UP_SECONDS = 20

logger = logging.getLogger(__name__)


def _give_up_runs_on_shutdown() -> None:
    """Under daphne, before its reactor stops (SIGTERM from systemd, Ctrl+C in a terminal): the
    runs this process executes are marked interrupted with their kept text and awaited, so
    nothing is left looking alive until the next start's sweep; then the model client's
    connections are closed on the loop that opened them (`core.loop_owned`: the reactor stops
    its loop without the shutdown of async generators that would). Daphne installs its reactor
    before it imports this module; under another server there is none, and nothing to do. The
    development server of `scripts/run.sh` runs the reactor in a thread its autoreloader ends
    without a shutdown: there the next start's sweep marks such runs interrupted, as before."""
    reactor = sys.modules.get("twisted.internet.reactor")
    if reactor is None:
        return
    from twisted.internet import defer

    from skills_app.core import loop_owned
    from skills_app.runs import supervisor

    async def stop() -> None:
        try:
            # Bounded: a database that does not answer must not hold the stop past systemd's.
            await asyncio.wait_for(supervisor.give_up(), timeout=GIVE_UP_SECONDS)
        finally:
            closed = await loop_owned.close_for_running_loop()
            logger.info("process stopping: %d model client(s) closed", closed)

    def give_up() -> defer.Deferred[None]:
        # A context of its own: the reactor may fire this from a callback that ran inside a
        # sync_to_async call, whose marker would make asgiref refuse the database call.
        task = asyncio.get_event_loop().create_task(stop(), context=contextvars.Context())
        return defer.Deferred.fromFuture(task)

    reactor.addSystemEventTrigger("before", "shutdown", give_up)


_give_up_runs_on_shutdown()

# The model SDK is imported by the first model call otherwise (skills_app/core/llm.py): loaded
# now, the first answer after a start does not wait 1.3 s for it, and it is frozen below. Where
# answers run in workers (RUN_EXECUTOR=worker, which load it when they start), a web process
# leaves it to its first model call, if any: 1.9 s of CPU less per web process start.
if settings.RUN_EXECUTOR == "inline":
    load_sdk()

# What is loaded by now (Django, the SDK, every module) lives as long as the process. Frozen, it
# is left out of the garbage collector's full passes, which otherwise walk a few hundred thousand
# objects and pause the event loop, and every live stream with it, for a quarter of a second.
gc.freeze()

# The event loop shares the interpreter lock with the database thread. While that thread
# computes without a break (100 runs set up, or their answers stored, at once), the loop waits
# for the lock every time it wakes, up to the switch interval each time (5 ms by default), and
# the live text queues behind it. 1 ms keeps those waits short (bench/RESULTS.md, "The
# interpreter's switch interval").
SWITCH_INTERVAL_SECONDS = 0.001
sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
