"""Sessions follow the account past one process: a user deactivated by a third process (an
administrator's save, a management command) has their sockets closed in every web process,
through the Redis channel layer, and cannot reconnect."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.multiprocess.conftest import PUBLIC_HOST
from tests.multiprocess.wsclient import ConnectionClosed, WebSocket

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(300)]

# 4401 (the account changed), as the close frame carries it.
ACCOUNT_CHANGED_HEX = f"{4401:04x}"


async def _open(port: int, conversation: int, session: str) -> WebSocket:
    ws = await WebSocket.connect(
        "127.0.0.1",
        port,
        f"/ws/conversations/{conversation}/",
        headers={
            "Host": PUBLIC_HOST,
            "Origin": f"https://{PUBLIC_HOST}",
            "Cookie": f"sessionid={session}",
        },
    )
    await ws.send_json({"action": "resume", "after": 0})
    deadline = time.monotonic() + 20
    while (await ws.receive_frame(timeout=max(0.1, deadline - time.monotonic()))).get(
        "type"
    ) != "resumed":
        pass
    return ws


async def _close_code(ws: WebSocket, timeout: float = 20) -> str:
    deadline = time.monotonic() + timeout
    while True:
        try:
            await ws.receive_frame(timeout=max(0.1, deadline - time.monotonic()))
        except ConnectionClosed as closed:
            return str(closed)


async def test_a_user_deactivated_elsewhere_loses_the_sockets_of_every_web_process(
    deployment: Any,
):
    for name in ("web-a", "web-b"):
        deployment.spawn_web(name)
    user = deployment.db_tool("setup", "dora")
    deployment.wait_ready("web-a", "web-b")
    conversation, session = user["conversation"], user["session"]
    tabs = [await _open(deployment.ports[n], conversation, session) for n in ("web-a", "web-b")]
    # Both tabs read at once: each takes its close frame as it comes.
    closing = [asyncio.create_task(_close_code(tab)) for tab in tabs]
    # A third process (off this loop, so the tabs read meanwhile): only Redis links them.
    await asyncio.to_thread(deployment.db_tool, "deactivate", "dora")
    for code in await asyncio.gather(*closing):
        assert ACCOUNT_CHANGED_HEX in code, code
    with pytest.raises(ConnectionClosed):
        await _open(deployment.ports["web-a"], conversation, session)
