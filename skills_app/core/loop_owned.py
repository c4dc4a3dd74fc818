"""What belongs to one event loop (the model client's connections), closed on that loop before it
ends.

An aiohttp session can only be closed on the loop that opened it, and one collected unclosed is
reported as an error ("Unclosed client session", "Unclosed connector"). A process runs loops of
several lifetimes: the worker's (`asyncio.run`), one per call of sync code into async code
(asgiref's `async_to_sync`, also `asyncio.run`), pytest-asyncio's per test (`asyncio.Runner`),
and daphne's, which Twisted's reactor runs for the whole process.

asyncio has one way of telling that a loop is ending: `loop.shutdown_asyncgens()`, which
`asyncio.run` and `asyncio.Runner` await before they close the loop, closes every async
generator still suspended on it. `get` parks one such generator per loop, and its `finally`
exits everything the loop owns. Twisted's reactor never calls it, so the daphne process calls
`close_for_running_loop` itself before the reactor stops (webapp/asgi.py). A loop closed in
neither way keeps what it owned open until the process ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Hashable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

T = TypeVar("T")


@dataclass(slots=True)
class _Owned:
    """One loop's values by key, the stack that exits them, and the generator that ends them."""

    values: dict[Hashable, Any] = field(default_factory=dict)
    stack: AsyncExitStack = field(default_factory=AsyncExitStack)
    keeper: AsyncGenerator[None, None] | None = None


# Held here, strongly, until each loop ends: a keeper left to the garbage collector would be
# finalized in the same pass as the session it holds, which aiohttp reports as unclosed.
_loops: dict[asyncio.AbstractEventLoop, _Owned] = {}


async def _keep(loop: asyncio.AbstractEventLoop, owned: _Owned) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        _loops.pop(loop, None)
        await owned.stack.aclose()


async def get(key: Hashable, opener: Callable[[], AbstractAsyncContextManager[T]]) -> T:
    """What `key` names on the running loop: `opener()` entered once, exited as the loop ends."""
    loop = asyncio.get_running_loop()
    owned = _loops.get(loop)
    if owned is None:
        owned = _loops[loop] = _Owned()
        owned.keeper = _keep(loop, owned)
        # Its first step registers it with the running loop (asyncio's async generator hooks).
        await anext(owned.keeper)
    if key not in owned.values:
        owned.values[key] = await owned.stack.enter_async_context(opener())
    return cast(T, owned.values[key])


async def close_for_running_loop() -> int:
    """Exit everything the running loop owns now (the next `get` opens afresh); how many."""
    owned = _loops.get(asyncio.get_running_loop())
    if owned is None or owned.keeper is None:
        return 0
    await owned.keeper.aclose()
    return len(owned.values)
