# The part of channels-redis that webapp/redis_layer.py subclasses; the package ships no types.
import asyncio
from collections import defaultdict
from typing import Any

from channels.layers import BaseChannelLayer, _ChannelCapacityDict
from redis.asyncio import Redis

class BoundedQueue(asyncio.Queue[dict[str, Any]]): ...

class RedisLoopLayer:
    channel_layer: RedisChannelLayer
    _connections: dict[int, Redis]

class RedisChannelLayer(BaseChannelLayer):
    brpop_timeout: int
    prefix: str
    group_expiry: int
    hosts: list[dict[str, Any]]
    ring_size: int
    client_prefix: str
    receive_buffer: defaultdict[str, BoundedQueue]
    _layers: dict[asyncio.AbstractEventLoop, RedisLoopLayer]

    def __init__(
        self,
        hosts: list[Any] | None = None,
        prefix: str = "asgi",
        expiry: int = 60,
        group_expiry: int = 86400,
        capacity: int = 100,
        channel_capacity: _ChannelCapacityDict | None = None,
        symmetric_encryption_keys: list[str] | None = None,
        random_prefix_length: int = 12,
        serializer_format: str = "msgpack",
    ) -> None: ...
    async def send(self, channel: str, message: dict[str, Any]) -> None: ...
    async def receive(self, channel: str) -> dict[str, Any]: ...
    async def _clean_receive_backup(self, index: int, channel: str) -> None: ...
    async def new_channel(self, prefix: str = "specific") -> str: ...
    async def flush(self) -> None: ...
    async def close_pools(self) -> None: ...
    async def group_add(self, group: str, channel: str) -> None: ...
    async def group_discard(self, group: str, channel: str) -> None: ...
    async def group_send(self, group: str, message: dict[str, Any]) -> None: ...
    def connection(self, index: int) -> Redis: ...
