"""Settings for comparing channel layers under the multi-process load (bench_multiprocess.py).

`bench/bench_multiprocess.py --layer NAME` starts every process with these settings and
BENCH_LAYER=NAME: the project's settings with the channel layer's backend replaced.

- ours: webapp.redis_layer.ResilientRedisChannelLayer (the settings' own)
- core: channels_redis.core.RedisChannelLayer, stock, with the same configuration
- pubsub: channels_redis.pubsub.RedisPubSubChannelLayer, stock (no capacity or expiry: pub/sub
  keeps no queue in Redis)
"""

from __future__ import annotations

import copy
import os
from typing import Any

from webapp import settings as base
from webapp.settings import *  # noqa: F403

LAYERS = {
    "ours": "webapp.redis_layer.ResilientRedisChannelLayer",
    "core": "channels_redis.core.RedisChannelLayer",
    "pubsub": "channels_redis.pubsub.RedisPubSubChannelLayer",
}

CHANNEL_LAYERS: dict[str, Any] = copy.deepcopy(base.CHANNEL_LAYERS)
_layer = os.environ.get("BENCH_LAYER", "ours")
CHANNEL_LAYERS["default"]["BACKEND"] = LAYERS[_layer]
if _layer == "pubsub":
    CHANNEL_LAYERS["default"]["CONFIG"] = {"hosts": CHANNEL_LAYERS["default"]["CONFIG"]["hosts"]}
