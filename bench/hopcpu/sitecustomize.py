"""What the database thread spends per hop, in a benchmark's daphne (diagnostics, off by default).

Put this folder on PYTHONPATH and set SKILLSCOPE_HOPS=PATH: every `sync_to_async` /
`database_sync_to_async` call that daphne makes is written to PATH as one line, "start (epoch
seconds) TAB CPU ms of the thread TAB wall ms TAB function". The thread's CPU time excludes the
time it waited for the interpreter lock, so the figures hold on a busy machine. With
SKILLSCOPE_HOPS_PROFILE=PATH, the hops are also profiled (cProfile, this thread only) into
PATH.start (until the second stored answer: the warm-up's is the first) and PATH.end.
`bench/hop_report.py` sums the file by phase. Only processes whose command line names daphne
are traced.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

_TRACED = "daphne" in " ".join(sys.argv)


def _name(func: Any, args: tuple[Any, ...]) -> str:
    target = args[0] if args and hasattr(args[0], "func") else func
    while hasattr(target, "func"):
        target = target.func
    target = getattr(target, "__wrapped__", target)
    return f"{getattr(target, '__module__', '')}.{getattr(target, '__qualname__', repr(target))}"


def _install_hops(path: str) -> None:
    import asgiref.sync
    import channels.db

    out = open(path, "a", buffering=1)  # noqa: SIM115 (open for the life of the process)
    lock = threading.Lock()

    def wrap(original: Any, outermost: bool) -> Any:
        def thread_handler(
            self: Any,
            loop: Any,
            exc_info: Any,
            task_context: Any,
            func: Any,
            *args: Any,
            **kwargs: Any,
        ) -> Any:
            # channels' handler calls the base one: time only the outermost.
            if not outermost and isinstance(self, channels.db.DatabaseSyncToAsync):
                return original(self, loop, exc_info, task_context, func, *args, **kwargs)
            wall, cpu = time.time(), time.thread_time()
            try:
                return original(self, loop, exc_info, task_context, func, *args, **kwargs)
            finally:
                spent, took = time.thread_time() - cpu, time.time() - wall
                with lock:
                    out.write(
                        f"{wall:.4f}\t{spent * 1e3:.3f}\t{took * 1e3:.3f}\t{_name(func, args)}\n"
                    )

        return thread_handler

    base = asgiref.sync.SyncToAsync
    base.thread_handler = wrap(base.thread_handler, outermost=False)  # type: ignore[method-assign]
    db = channels.db.DatabaseSyncToAsync
    db.thread_handler = wrap(db.thread_handler, outermost=True)  # type: ignore[method-assign]


def _install_profile(path: str) -> None:
    import cProfile

    import asgiref.sync

    profiles = {"start": cProfile.Profile(), "end": cProfile.Profile()}
    state = {"stored": 0, "hops": 0}
    original = asgiref.sync.SyncToAsync.thread_handler

    def thread_handler(
        self: Any, loop: Any, exc_info: Any, task_context: Any, func: Any, *args: Any, **kwargs: Any
    ) -> Any:
        if _name(func, args).endswith("_store_message"):
            state["stored"] += 1
        profile = profiles["end" if state["stored"] >= 2 else "start"]
        profile.enable()
        try:
            return original(self, loop, exc_info, task_context, func, *args, **kwargs)
        finally:
            profile.disable()
            state["hops"] += 1
            if state["hops"] % 100 == 0:
                for phase, done in profiles.items():
                    done.dump_stats(f"{path}.{phase}")

    asgiref.sync.SyncToAsync.thread_handler = thread_handler  # type: ignore[method-assign]


if _TRACED and os.environ.get("SKILLSCOPE_HOPS"):
    _install_hops(os.environ["SKILLSCOPE_HOPS"])
if _TRACED and os.environ.get("SKILLSCOPE_HOPS_PROFILE"):
    _install_profile(os.environ["SKILLSCOPE_HOPS_PROFILE"])
