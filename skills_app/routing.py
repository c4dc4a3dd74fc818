"""Websocket routes and worker channels."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from django.urls import path

from skills_app.chat.consumers import ConversationConsumer
from skills_app.runs.supervisor import RUN_CHANNEL
from skills_app.runs.workers import RunConsumer

if TYPE_CHECKING:
    from collections.abc import Callable

    from channels.consumer import _ASGIApplicationProtocol
    from channels.routing import URLRouter, _ExtendedURLPattern
    from django.http import HttpResponseBase


def websocket_path(route: str, consumer: _ASGIApplicationProtocol) -> _ExtendedURLPattern:
    """A websocket route for Channels' URLRouter."""
    # URLRouter reuses Django's path() for ASGI applications; django-stubs types path() for
    # views, typeshed's Channels stubs the pattern it gives for a consumer.
    pattern = path(route, cast("Callable[..., HttpResponseBase]", consumer))
    return cast("_ExtendedURLPattern", pattern)


websocket_urlpatterns: list[_ExtendedURLPattern | URLRouter] = [
    websocket_path("ws/conversations/<int:conversation_id>/", ConversationConsumer.as_asgi()),
]
# `manage.py runworker skillscope-runs` executes agent runs (RUN_EXECUTOR=worker).
channel_routes: dict[str, Any] = {RUN_CHANNEL: RunConsumer.as_asgi()}
