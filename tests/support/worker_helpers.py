"""Run workers inside a test's event loop, on the in-memory channel layer.

Each `RunWorker` keeps its own registration, heartbeat and claims exactly as `runworker` does;
only the process boundary is missing (tests/multiprocess has it, with Redis and PostgreSQL).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from channels.layers import get_channel_layer
from channels.routing import ChannelNameRouter

from skills_app.models import Run, Worker
from skills_app.routing import channel_routes
from skills_app.runs import queue
from skills_app.runs.workers import RunWorker
from tests.support.fake_anthropic import Reply

# Fast heartbeats for tests; the multi-process test keeps the defaults.
FAST = {"WORKER_HEARTBEAT_SECONDS": 0.2, "WORKER_STALE_SECONDS": 1.0}


def use_fast_heartbeats(settings: Any) -> None:
    for name, value in FAST.items():
        setattr(settings, name, value)


@asynccontextmanager
async def running_worker() -> AsyncIterator[RunWorker]:
    """A `runworker skillscope-runs` equivalent beside the test; stopped (and deregistered) after."""
    instance = RunWorker(
        application=ChannelNameRouter(channel_routes),
        channels=[queue.RUN_CHANNEL],
        channel_layer=get_channel_layer(),
    )
    task = asyncio.ensure_future(instance.arun())
    try:
        await until(lambda: _registered(instance))
        yield instance
    finally:
        instance.stop()  # as SIGTERM does: its runs are interrupted, it deregisters
        try:
            await asyncio.wait_for(task, 20)
        finally:
            task.cancel()


def _registered(instance: RunWorker) -> bool:
    return instance.loop is not None and Worker.objects.filter(name=instance.loop.name).exists()


async def until(predicate: Callable[[], bool], *, timeout: float = 10.0) -> None:
    """Wait (bounded) until a database-reading predicate holds."""
    from asgiref.sync import sync_to_async

    deadline = asyncio.get_running_loop().time() + timeout
    while not await sync_to_async(predicate)():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not true after {timeout} s: {predicate}")
        await asyncio.sleep(0.02)


async def after_ticks(instance: RunWorker, count: int, *, timeout: float = 10.0) -> None:
    """Wait until the worker's loop has gone round `count` more times (beat, sweep, claim)."""
    assert instance.loop is not None
    target = instance.loop.ticks + count
    deadline = asyncio.get_running_loop().time() + timeout
    while instance.loop.ticks < target:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"the worker's loop did not go round {count} times in {timeout} s")
        await asyncio.sleep(0.01)


async def wait_event(event: threading.Event, timeout: float = 10) -> None:
    reached = await asyncio.get_running_loop().run_in_executor(None, event.wait, timeout)
    assert reached, "the fake model never reached its pause"


def paused(text: str) -> tuple[Reply, threading.Event, threading.Event]:
    """A streamed reply that stops after a few events until `gate` is set."""
    gate, reached = threading.Event(), threading.Event()
    reply = Reply.text(text, chunk=6, wait_for=gate, wait_after_events=8, reached=reached)
    return reply, gate, reached


def status(run_id: int) -> str:
    return Run.objects.values_list("status", flat=True).get(pk=run_id)
