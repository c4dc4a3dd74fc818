"""The in-memory channel layer keeps Channels' semantics at a lower cost per message."""

from __future__ import annotations

import pytest
from channels.exceptions import ChannelFull

from webapp import layers
from webapp.layers import InMemoryChannelLayer


async def test_every_member_of_a_group_gets_its_own_copy():
    layer = InMemoryChannelLayer()
    one, two = await layer.new_channel(), await layer.new_channel()
    await layer.group_add("chat", one)
    await layer.group_add("chat", two)
    await layer.group_send("chat", {"type": "x", "event": {"items": [1, 2]}})
    first, second = await layer.receive(one), await layer.receive(two)
    first["event"]["items"].append(3)
    assert second == {"type": "x", "event": {"items": [1, 2]}}


async def test_a_full_channel_refuses_and_a_group_send_skips_it():
    layer = InMemoryChannelLayer(capacity=2)
    full, free = await layer.new_channel(), await layer.new_channel()
    await layer.group_add("chat", full)
    await layer.group_add("chat", free)
    for i in range(2):
        await layer.send(full, {"type": "x", "i": i})
    with pytest.raises(ChannelFull):
        await layer.send(full, {"type": "x", "i": 2})
    await layer.group_send("chat", {"type": "x", "i": 3})
    assert (await layer.receive(free))["i"] == 3
    assert [(await layer.receive(full))["i"] for _ in range(2)] == [0, 1]


async def test_expired_messages_are_swept_at_most_once_per_interval(monkeypatch):
    layer = InMemoryChannelLayer(expiry=-1)  # what is sent has expired already
    channel = await layer.new_channel()
    await layer.group_add("chat", channel)
    await layer.send(channel, {"type": "old"})
    layer.expiry = 60  # what is sent from now on is fresh
    layer._swept = 0.0  # a sweep is due now
    other = await layer.new_channel()
    await layer.send(other, {"type": "fresh"})
    assert (await layer.receive(other))["type"] == "fresh"
    # The expired message was swept, and its channel left the group (Channels' rule).
    assert channel not in layer.channels and channel not in layer.groups.get("chat", {})
    sweeps = []
    monkeypatch.setattr(
        layers.ChannelsInMemoryLayer, "_clean_expired", lambda self: sweeps.append(1)
    )
    for _ in range(50):
        await layer.group_send("chat", {"type": "x"})
    assert len(sweeps) <= 1


async def test_a_channel_keeps_its_queue_between_receives():
    layer = InMemoryChannelLayer()
    channel = await layer.new_channel()
    await layer.send(channel, {"type": "x", "i": 0})
    queue = layer.channels[channel]
    assert (await layer.receive(channel))["i"] == 0
    await layer.send(channel, {"type": "x", "i": 1})
    assert layer.channels[channel] is queue  # not a new queue per message
    assert (await layer.receive(channel))["i"] == 1


async def test_a_cancelled_receive_and_the_sweep_drop_empty_queues():
    import asyncio

    layer = InMemoryChannelLayer()
    left, waiting, idle = [await layer.new_channel() for _ in range(3)]
    receive = asyncio.ensure_future(layer.receive(left))
    waits = asyncio.ensure_future(layer.receive(waiting))
    await layer.send(idle, {"type": "x"})
    await layer.receive(idle)
    while left not in layer.channels or waiting not in layer.channels:
        await asyncio.sleep(0)  # both receives are waiting on their queues
    receive.cancel()  # the consumer left
    with pytest.raises(asyncio.CancelledError):
        await receive
    assert left not in layer.channels
    assert idle in layer.channels  # kept after its receive, until the sweep
    layer._swept = 0.0  # a sweep is due now
    layer._clean_expired()
    assert idle not in layer.channels
    assert waiting in layer.channels  # someone waits on it: kept
    await layer.send(waiting, {"type": "x", "i": 7})
    assert (await waits)["i"] == 7
