"""Websocket routes and worker channels."""

from __future__ import annotations

from typing import Any

from django.urls import path

from skills_app.chat.consumers import ConversationConsumer
from skills_app.runs.supervisor import RUN_CHANNEL
from skills_app.runs.workers import RunConsumer

websocket_urlpatterns: list[Any] = [
    path("ws/conversations/<int:conversation_id>/", ConversationConsumer.as_asgi()),
]
# `manage.py runworker skillscope-runs` executes agent runs (RUN_EXECUTOR=worker).
channel_routes: dict[str, Any] = {RUN_CHANNEL: RunConsumer.as_asgi()}
