"""The Redis channel layer (stock pub/sub) rides out a Redis restart and an outage, on a real
redis-server.

With the stock layer alone, a channel named while Redis was away raised (a websocket got HTTP
500), the receive task logged a traceback for each failed read, and channels added to a group
meanwhile never heard from it again.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest

from webapp.redis_layer import RESUMED, LayerUnavailable, RedisChannelLayer, redis_host


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """A throw-away redis-server that can be stopped and started again on the same port."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        assert binary
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(10)
            self.process = None


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed: ./scripts/test.sh installs it")
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _layer(server: RedisServer) -> RedisChannelLayer:
    return RedisChannelLayer(hosts=[redis_host(server.url)])


async def _receive(layer: RedisChannelLayer, channel: str, timeout: float = 5) -> dict:
    return await asyncio.wait_for(layer.receive(channel), timeout)


async def _until_delivered(
    sender: RedisChannelLayer, group: str, receiver: RedisChannelLayer, channel: str
) -> list[str]:
    """Send to the group until the channel hears it (the subscriber reconnects in the
    background); the types it received. A receive is never cancelled meanwhile: the stock layer
    takes that for a consumer that left, and forgets its channel."""
    deadline = time.monotonic() + 15
    got: list[str] = []
    receiving = asyncio.ensure_future(receiver.receive(channel))
    while "x.ping" not in got:
        assert time.monotonic() < deadline, f"never heard {group} again: {got}"
        await sender.group_send(group, {"type": "x.ping"})
        await asyncio.wait([receiving], timeout=0.3)
        if receiving.done():
            got.append(receiving.result()["type"])
            if "x.ping" not in got:
                receiving = asyncio.ensure_future(receiver.receive(channel))
    return got


async def test_after_a_restart_groups_reach_their_channels_and_new_channels_open(redis_server):
    web, worker = _layer(redis_server), _layer(redis_server)
    tab = await web.new_channel()
    await web.group_add("conversation-1", tab)
    await worker.group_send("conversation-1", {"type": "before.restart"})
    assert (await _receive(web, tab))["type"] == "before.restart"
    redis_server.stop()
    redis_server.start()
    # The pooled connections are dead: redis-py retries on new ones (the settings' Retry), and
    # the subscriber subscribes again (a restart the layer noticed also tells it to catch up).
    got = await _until_delivered(worker, "conversation-1", web, tab)
    assert set(got) <= {RESUMED, "x.ping"}, got
    other = await web.new_channel()
    await web.group_add("conversation-2", other)
    await worker.group_send("conversation-2", {"type": "x.y", "n": 1})
    assert await _receive(web, other) == {"type": "x.y", "n": 1}
    for layer in (web, worker):
        await layer.flush()


async def test_an_outage_is_waited_out_quietly_and_channels_catch_up_when_redis_is_back(
    redis_server, caplog
):
    caplog.set_level(logging.INFO)
    layer = _layer(redis_server)
    tab = await layer.new_channel()
    await layer.group_add("conversation-1", tab)
    receiving = asyncio.ensure_future(layer.receive(tab))
    redis_server.stop()

    # Nothing raises but a direct send, and nothing waits on Redis once it is known away.
    with pytest.raises(LayerUnavailable):
        await layer.send("skillscope-runs", {"type": "run.execute"})
    assert not layer.up
    started = time.monotonic()
    for _ in range(20):
        await layer.group_send("conversation-1", {"type": "lost.message"})
    assert time.monotonic() - started < 0.5 and layer.dropped == 20
    # A tab opens meanwhile (the stock layer raised here: HTTP 500) and joins the group.
    late = await layer.new_channel()
    await layer.group_add("conversation-1", late)
    late_receiving = asyncio.ensure_future(layer.receive(late))
    await asyncio.sleep(2.5)  # the receive task fails several reads, the probe several times
    assert not receiving.done() and not late_receiving.done()

    redis_server.start()
    # Both channels are told to catch up from the database, then the group reaches both.
    assert await asyncio.wait_for(receiving, 20) == {"type": RESUMED}
    assert await asyncio.wait_for(late_receiving, 5) == {"type": RESUMED}
    assert layer.up
    await layer.group_send("conversation-1", {"type": "after.outage"})
    assert (await _receive(layer, tab))["type"] == "after.outage"
    assert (await _receive(layer, late))["type"] == "after.outage"

    # One line when Redis was lost (with a traceback), one when it was back; no ERROR, and
    # none of the stock receive task's tracebacks.
    lines = [r for r in caplog.records if r.name == "skills_app.ops.channel_layer"]
    assert [getattr(r, "state", None) for r in lines] == ["lost", "back"], [
        r.getMessage() for r in lines
    ]
    assert lines[0].exc_info is not None and "retrying in 0.5 s" in lines[0].getMessage()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [
        r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR
    ]
    await layer.flush()


async def test_a_named_channel_first_received_during_an_outage_receives_when_redis_is_back(
    redis_server,
):
    # A worker started while Redis is away: its first receive on the runs' channel fails to
    # subscribe, and the stock layer keeps the channel without a subscription.
    worker, web = _layer(redis_server), _layer(redis_server)
    await web.send("skillscope-runs", {"type": "nobody.listens"})  # web knows Redis is up
    redis_server.stop()
    receiving = asyncio.ensure_future(worker.receive("skillscope-runs"))
    await asyncio.sleep(1)
    assert not receiving.done()
    redis_server.start()
    # The worker's layer reconnects with its backoff, then subscribes the channel again.
    deadline = time.monotonic() + 30
    while not receiving.done():
        assert time.monotonic() < deadline, "the runs' channel was never subscribed again"
        try:
            await web.send("skillscope-runs", {"type": "run.execute", "run_id": 7})
        except LayerUnavailable:
            pass
        await asyncio.sleep(0.2)
    assert receiving.result() == {"type": "run.execute", "run_id": 7}
    for layer in (worker, web):
        await layer.flush()


async def test_a_membership_discarded_during_an_outage_is_not_added_again(redis_server):
    layer = _layer(redis_server)
    tab, other = await layer.new_channel(), await layer.new_channel()
    await layer.group_add("conversation-1", tab)
    await layer.group_add("conversation-1", other)
    redis_server.stop()
    with pytest.raises(LayerUnavailable):
        await layer.send(tab, {"type": "x"})
    await layer.group_discard("conversation-1", tab)  # the tab closed during the outage
    redis_server.start()
    assert (await _receive(layer, other, 20))["type"] == RESUMED
    await layer.group_send("conversation-1", {"type": "x.y"})
    assert (await _receive(layer, other))["type"] == "x.y"
    with pytest.raises(TimeoutError):
        await _receive(layer, tab, 0.5)
    await layer.flush()
