"""The runs this process executes: one table shared by the supervisor, recovery and the worker."""

from __future__ import annotations

import asyncio
from typing import Any

# run id -> the task executing it here.
RUNNING: dict[int, asyncio.Task[Any]] = {}
# Runs executing here that another process already marked interrupted (their heartbeat looked
# dead): their history is closed, so whatever they still produce is dropped, not stored.
ABANDONED: set[int] = set()


def track(run_id: int, task: asyncio.Task[Any]) -> None:
    """Remember a run executing here until its task ends."""
    RUNNING[run_id] = task
    task.add_done_callback(lambda _t: RUNNING.pop(run_id, None))


def executing_here(run_id: int) -> bool:
    task = RUNNING.get(run_id)
    return task is not None and not task.done()
