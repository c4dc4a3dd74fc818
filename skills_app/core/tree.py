"""A skill folder on disk: find its SKILL.md, walk its files, and digest their bytes."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, NamedTuple

# Never part of a skill: VCS data, dependency trees and bytecode change without the skill changing.
SKIP_NAMES = frozenset({".git", "node_modules", "__pycache__", ".DS_Store"})
MAX_TREE_DEPTH = 6


class TreeEntry(NamedTuple):
    """One file or folder of a skill, with the stat fields the registry cache compares."""

    rel: str
    path: str
    is_dir: bool
    stamp: tuple[int, int, int]  # (mtime_ns, size, inode)


def find_skill_file(directory: Path) -> Path | None:
    """Return the SKILL.md of a folder (name matched case-insensitively), or None."""
    try:
        names = [
            e.name for e in os.scandir(directory) if e.name.lower() == "skill.md" and e.is_file()
        ]
    except OSError:
        return None
    if not names:
        return None
    return directory / ("SKILL.md" if "SKILL.md" in names else sorted(names)[0])


def walk_skill_tree(directory: Path) -> list[TreeEntry]:
    """List a skill's folders and files (symlinks followed once, bounded depth), sorted."""
    out: list[TreeEntry] = []
    seen: set[tuple[int, int]] = set()

    def visit(path: str, rel: str, depth: int) -> None:
        st = os.stat(path)
        if (st.st_dev, st.st_ino) in seen:
            return
        seen.add((st.st_dev, st.st_ino))
        out.append(TreeEntry(rel, path, True, (st.st_mtime_ns, st.st_size, st.st_ino)))
        with os.scandir(path) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            if entry.name in SKIP_NAMES:
                continue
            child_rel = f"{rel}/{entry.name}" if rel else entry.name
            try:
                if entry.is_dir():
                    if depth < MAX_TREE_DEPTH:
                        visit(entry.path, child_rel, depth + 1)
                elif entry.is_file():
                    fst = entry.stat()
                    stamp = (fst.st_mtime_ns, fst.st_size, fst.st_ino)
                    out.append(TreeEntry(child_rel, entry.path, False, stamp))
            except OSError:
                continue  # a dangling symlink is not part of the skill

    visit(str(directory), "", 0)
    return out


def read_file(path: str) -> bytes:
    """The bytes of one file."""
    with open(path, "rb") as fh:
        return fh.read()


def digest_update(h: Any, rel: str, data: bytes) -> None:
    """Feed one file into a skill digest: relative path, size, then bytes."""
    h.update(f"{rel}\0{len(data)}\0".encode())
    h.update(data)


def skill_digest(directory: Path) -> str:
    """sha256 over the skill's files: for each file sorted by relative path, path + size + bytes."""
    h = hashlib.sha256()
    for entry in sorted(walk_skill_tree(directory), key=lambda e: e.rel):
        if not entry.is_dir:
            digest_update(h, entry.rel, read_file(entry.path))
    return h.hexdigest()
