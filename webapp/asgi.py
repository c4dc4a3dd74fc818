"""ASGI entry point: HTTP through Django, websockets through Channels."""

from __future__ import annotations

import gc
import os

from django.core.asgi import get_asgi_application

from webapp.configerror import exit_on_config_error

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

# Build the Django app first so models are ready before the consumers are imported.
# A settings error stops the server with status 78, which the systemd units do not restart.
with exit_on_config_error():
    django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ChannelNameRouter, ProtocolTypeRouter, URLRouter  # noqa: E402

from skills_app.routing import channel_routes, websocket_urlpatterns  # noqa: E402
from webapp.wsorigin import SameOriginValidator  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        # Exact scheme, host and port, as Django's CSRF check decides (webapp/wsorigin.py).
        "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
        "channel": ChannelNameRouter(channel_routes),
    }
)

# What is loaded by now (Django, the SDK, every module) lives as long as the process. Frozen, it
# is left out of the garbage collector's full passes, which otherwise walk a few hundred thousand
# objects and pause the event loop, and every live stream with it, for a quarter of a second.
gc.freeze()
