"""The bounded walk and the RE2 patterns Glob, Grep and `output_files` share.

Guarantees (`search.py` and `profiles/run_files.py` rely on them): patterns match in linear
time (RE2: `**/**/**/zz` cannot backtrack); a walk never enters a symlinked folder, goes at most
SEARCH_MAX_DEPTH folders down, and stops at its `Budget` (SEARCH_SECONDS, an entry limit, or a
cancel), saying which in `note()`. Walks run in a thread of their own (`run_cancellable`): when
the awaiting task is cancelled (Stop), the budget is cancelled and the thread stops at its next
entry instead of finishing the walk after the run has ended.
"""

from __future__ import annotations

import asyncio
import os
import re
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import re2

from skills_app.core.tools.errors import ToolError
from skills_app.core.tools.workspace import Workspace

SEARCH_SECONDS = 20.0
SEARCH_ENTRY_LIMIT = 200_000
# Folders below this many levels are not entered (a tree deeper than that is an attack or a
# mistake; the note says how to look deeper: search from a deeper path).
SEARCH_MAX_DEPTH = 40
_REGEX_MEMORY = 64 * 1024 * 1024
_BRACES = re.compile(r"\{([^{}]*)\}")

PathFilter = Callable[[str], bool]
T = TypeVar("T")


class Budget:
    """What one walk may spend (time, entries, depth) and its cancel flag.

    Read on the walking thread, cancelled from the event loop's: the flag is a threading.Event.
    The limits are read when the budget is made, so one walk keeps the limits it started with.
    """

    def __init__(self, *, seconds: float | None = None, entries: int | None = None) -> None:
        self.seconds = SEARCH_SECONDS if seconds is None else seconds
        self.deadline = time.monotonic() + self.seconds
        self.entry_limit = SEARCH_ENTRY_LIMIT if entries is None else entries
        self.max_depth = SEARCH_MAX_DEPTH
        self.entries = 0
        self.stopped = ""  # why the walk stopped early
        self.too_deep = False  # some folder was not entered for being too deep
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        self._cancelled.set()

    def spent(self) -> bool:
        """True (and `stopped` says why) once the walk must stop."""
        if not self.stopped:
            if self._cancelled.is_set():
                self.stopped = "stopped: the call was cancelled"
            elif time.monotonic() > self.deadline:
                self.stopped = f"stopped after {self.seconds:g} seconds"
            elif self.entries > self.entry_limit:
                self.stopped = f"stopped after {self.entry_limit} entries"
        return bool(self.stopped)

    def note(self, what: str = "search") -> str:
        """What the result should say about a walk cut short (empty when it was not)."""
        notes = []
        if self.stopped:
            notes.append(f"{what} {self.stopped}; narrow the pattern or the path")
        if self.too_deep:
            notes.append(
                f"folders below {self.max_depth} folder levels were not searched; "
                "give a deeper path to search them"
            )
        return "; ".join(notes)


async def run_cancellable(work: Callable[[], T], budget: Budget) -> T:
    """Run `work` (which spends `budget`) in a thread of its own; cancelling the caller cancels
    the budget, so the thread stops at its next entry."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if done.done():
            return  # the caller was cancelled meanwhile
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)  # type: ignore[arg-type]

    def target() -> None:
        try:
            result = work()
        except BaseException as exc:  # handed to the awaiting task, which re-raises it
            loop.call_soon_threadsafe(settle, None, exc)
        else:
            loop.call_soon_threadsafe(settle, result, None)

    # A thread of its own (daemon: it ends at the budget's next check; a process exiting
    # meanwhile does not wait for it).
    threading.Thread(target=target, name="skillscope-walk", daemon=True).start()
    try:
        return await done
    except asyncio.CancelledError:
        budget.cancel()
        raise


def search_base(tool: str, ws: Workspace, path: str | None) -> Path:
    """The folder (or file) to search: `path` in the workspace, root when absent."""
    base = ws.resolve(path or ".")
    if not base.exists():
        raise ToolError(
            f"{tool}: path does not exist: {path}. Relative paths start at the workspace root."
        )
    return base


def _inside_root(ws: Workspace, path: Path) -> Path | None:
    """The real path when it stays inside the workspace (symlinks included), else None."""
    try:
        real = path.resolve()
    except (OSError, RuntimeError):
        return None
    return real if real == ws.root or real.is_relative_to(ws.root) else None


def expand_braces(pattern: str) -> list[str]:
    """Expand shell-style braces: "*.{md,txt}" -> ["*.md", "*.txt"]."""
    match = _BRACES.search(pattern)
    if match is None:
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    return [p for alt in match.group(1).split(",") for p in expand_braces(head + alt + tail)]


def compile_regex(pattern: str, *, ignore_case: bool = False) -> re2._Regexp:
    """An RE2 pattern (linear-time matching); ValueError with RE2's reason when it is invalid."""
    options = re2.Options()
    options.case_sensitive = not ignore_case
    options.max_mem = _REGEX_MEMORY
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise ValueError(str(reason)) from None


class Walk:
    """A bounded walk below a folder that never enters a symlinked folder."""

    def __init__(
        self, ws: Workspace, allowed: PathFilter | None, budget: Budget | None = None
    ) -> None:
        self.ws = ws
        self.allowed = allowed
        self.budget = budget or Budget()

    @property
    def stopped(self) -> str:
        """Why the walk stopped early, for the result's note (empty when it did not)."""
        return self.budget.stopped

    def out_of_budget(self) -> bool:
        return self.budget.spent()

    def note(self) -> str:
        return self.budget.note()

    def visible(self, real: Path) -> bool:
        return self.allowed is None or self.allowed(str(real))

    def entries_below(
        self, base: Path, skip: frozenset[str] = frozenset()
    ) -> Iterator[tuple[Path, Path, bool]]:
        """(path as walked, real path, is a folder) for everything below base, sorted."""
        budget = self.budget
        for dirpath, dirnames, filenames in os.walk(base):  # followlinks=False
            if budget.spent():
                return
            here = Path(dirpath)
            dirnames[:] = sorted(d for d in dirnames if d not in skip)
            linked = [d for d in dirnames if (here / d).is_symlink()]
            # A symlinked folder is listed (if it leads inside) but never entered.
            dirnames[:] = [d for d in dirnames if d not in linked]
            listed = [*dirnames, *linked]
            if dirnames and len(here.relative_to(base).parts) >= budget.max_depth:
                budget.too_deep = True
                dirnames[:] = []  # listed, not entered
            for name in [*listed, *sorted(filenames)]:
                # Checked per entry: a cancel or a deadline ends the walk here, not at the
                # next folder (one folder may hold a million entries).
                budget.entries += 1
                if budget.spent():
                    return
                walked = here / name
                if name in linked or walked.is_symlink():
                    real = _inside_root(self.ws, walked)
                    if real is None:
                        continue
                else:
                    real = walked
                try:
                    is_dir = stat.S_ISDIR(real.stat().st_mode)
                except OSError:
                    continue
                if self.visible(real):
                    yield walked, real, is_dir
