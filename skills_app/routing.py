"""Websocket routes and worker channels."""

from __future__ import annotations

from typing import Any

from django.urls import path

from .consumers import ConversationConsumer

websocket_urlpatterns: list[Any] = [
    path("ws/conversations/<int:conversation_id>/", ConversationConsumer.as_asgi()),
]
channel_routes: dict[str, Any] = {}
