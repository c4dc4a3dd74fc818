"""Settings for comparing channel layers under the multi-process load (bench_multiprocess.py).

`bench/bench_multiprocess.py --layer NAME` starts every process with these settings and
BENCH_LAYER=NAME: the project's settings with the channel layer's backend replaced.

- ours: webapp.redis_layer.RedisChannelLayer (the settings' own: stock pub/sub plus the outage
  handling)
- core: channels_redis.core.RedisChannelLayer, stock, the same hosts, with capacity 5000 and
  expiry 60 (as the settings gave it before issue 41)
- pubsub: channels_redis.pubsub.RedisPubSubChannelLayer, stock, the same hosts
"""

from __future__ import annotations

import copy
import os
from typing import Any

from webapp import settings as base
from webapp.settings import *  # noqa: F403

LAYERS = {
    "ours": "webapp.redis_layer.RedisChannelLayer",
    "core": "channels_redis.core.RedisChannelLayer",
    "pubsub": "channels_redis.pubsub.RedisPubSubChannelLayer",
}

CHANNEL_LAYERS: dict[str, Any] = copy.deepcopy(base.CHANNEL_LAYERS)
_layer = os.environ.get("BENCH_LAYER", "ours")
CHANNEL_LAYERS["default"]["BACKEND"] = LAYERS[_layer]
if _layer == "core":
    CHANNEL_LAYERS["default"]["CONFIG"].update(capacity=5000, expiry=60)
