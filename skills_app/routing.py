"""Websocket routes and worker channels."""

from __future__ import annotations

from typing import Any

websocket_urlpatterns: list[Any] = []
channel_routes: dict[str, Any] = {}
