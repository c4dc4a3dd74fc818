"""The bounded walk and the RE2 patterns Glob and Grep share (their guarantees: `search.py`)."""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import re2

from skills_app.core.tools.errors import ToolError
from skills_app.core.tools.workspace import Workspace

SEARCH_SECONDS = 20.0
SEARCH_ENTRY_LIMIT = 200_000
_REGEX_MEMORY = 64 * 1024 * 1024
_BRACES = re.compile(r"\{([^{}]*)\}")

PathFilter = Callable[[str], bool]


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

    def __init__(self, ws: Workspace, allowed: PathFilter | None) -> None:
        self.ws = ws
        self.allowed = allowed
        self.deadline = time.monotonic() + SEARCH_SECONDS
        self.entries = 0
        self.stopped = ""  # why the walk stopped early, for the result's note

    def out_of_budget(self) -> bool:
        if not self.stopped and time.monotonic() > self.deadline:
            self.stopped = f"stopped after {SEARCH_SECONDS:g} seconds"
        if not self.stopped and self.entries > SEARCH_ENTRY_LIMIT:
            self.stopped = f"stopped after {SEARCH_ENTRY_LIMIT} entries"
        return bool(self.stopped)

    def visible(self, real: Path) -> bool:
        return self.allowed is None or self.allowed(str(real))

    def entries_below(
        self, base: Path, skip: frozenset[str] = frozenset()
    ) -> Iterator[tuple[Path, Path, bool]]:
        """(path as walked, real path, is a folder) for everything below base, sorted."""
        for dirpath, dirnames, filenames in os.walk(base):  # followlinks=False
            if self.out_of_budget():
                return
            here = Path(dirpath)
            dirnames[:] = sorted(d for d in dirnames if d not in skip)
            linked = [d for d in dirnames if (here / d).is_symlink()]
            # A symlinked folder is listed (if it leads inside) but never entered.
            dirnames[:] = [d for d in dirnames if d not in linked]
            for name in [*dirnames, *linked, *sorted(filenames)]:
                self.entries += 1
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


def stopped_note(stopped: str) -> str:
    """A note for the result when the walk stopped early (empty when it did not)."""
    return f"search {stopped}; narrow the pattern or the path" if stopped else ""
