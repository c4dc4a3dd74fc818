"""How many bytes a workspace holds, and the gate that bounds what one tool call may add to it.

A person's files (everything in their conversations' workspaces but the staged skills/) count
against a quota kept by the services; the tools reach it through `StorageGate`. Before a call that writes, `reserve` sets
aside the bytes it may add (never more than the person has left, nor the per-call write limit);
after it, `settle` measures what the workspace holds now and gives back what was not used. The
staged skills (skills/) are the server's copies and do not count.

What enforces the allowance inside a command (see `bash.py`): RLIMIT_FSIZE (no single file grows
past it), a size-limited tmpfs on /tmp, and a watcher that measures the workspace every
`WATCH_SECONDS` and kills the whole sandbox when it grew past the allowance. Between two
measures a command can still write what the disk takes in that time: the overshoot is bounded,
not zero, and the next call then gets nothing until files are removed.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from skills_app.core.tools.workspace import Workspace

WATCH_SECONDS = 0.05
_SLACK = 1 << 20
# Not counted: the server's read-only copies of the skills (the rest of the workspace is the
# person's, wherever a command wrote it: a command runs in the workspace root, and skill_run
# keeps its run records in runs/; counting only in/, work/ and out/ let a command store
# without limit beside them).
NOT_COUNTED = ("skills",)


def tree_bytes(root: Path, *, skip: tuple[str, ...] = ()) -> int:
    """Bytes under `root` (files only, each inode once, no links followed), without the
    entries of `root` itself named in `skip`.

    A file counts its length (a sparse file its full length), or its allocated blocks when
    those exceed the length by more than `_SLACK` (space preallocated past the end, e.g. by
    `fallocate --keep-size`); ordinary block rounding does not count.
    """
    total = 0
    seen: set[tuple[int, int]] = set()
    stack = [str(root)]
    while stack:
        folder = stack.pop()
        try:
            entries = os.scandir(folder)
        except OSError:
            continue
        with entries:
            for entry in entries:
                if skip and folder == str(root) and entry.name in skip:
                    continue
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(info.st_mode):
                    stack.append(entry.path)
                elif stat.S_ISREG(info.st_mode):
                    key = (info.st_dev, info.st_ino)
                    if key in seen:
                        continue
                    seen.add(key)
                    allocated = info.st_blocks * 512
                    over = allocated - info.st_size > _SLACK
                    total += allocated if over else info.st_size
    return total


def workspace_bytes(ws: Workspace) -> int:
    """What the workspace holds that counts against its owner's quota: all but skills/."""
    return tree_bytes(ws.root, skip=NOT_COUNTED)


def human(size: int) -> str:
    """1.5 MB, 200 KB, 12 bytes (decimal units, as people read disk sizes)."""
    value = float(size)
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{int(value)} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{size} bytes"


@dataclass(frozen=True, slots=True)
class Allowance:
    """Bytes one call may add to the workspace; `notice` says why it is small (or "")."""

    bytes: int
    before: int  # what the workspace held when the call started
    notice: str = ""


class StorageGate(Protocol):
    """The person's storage quota, as a tool call sees it."""

    async def reserve(self, ws: Workspace, wanted: int | None = None) -> Allowance:
        """Set bytes aside for one call (`wanted`: what it needs, None: as much as allowed)."""
        ...

    async def settle(self, ws: Workspace, allowance: Allowance) -> int:
        """Record what the workspace holds after the call, give back the rest; its size."""
        ...


__all__ = [
    "NOT_COUNTED",
    "WATCH_SECONDS",
    "Allowance",
    "StorageGate",
    "human",
    "tree_bytes",
    "workspace_bytes",
]
