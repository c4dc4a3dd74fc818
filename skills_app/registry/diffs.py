"""Two versions of a skill compared file by file: every file, scripts included.

The one place a text is diffed (`unified_lines`): the review page's file diffs and the admin's
SKILL.md diff both come from it, classified for colouring.

Text files get a unified diff; a binary file is compared by size and sha256, and so is a text
longer than DIFF_MAX_CHARS on either side (the review page shows its whole text instead).
Files only in one version are listed as added or removed, with their content as the diff (all
`+` or all `-` lines) when it is text.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass

from skills_app.core.review import PackageFile

# A diff longer than this many lines is cut (the whole file is still on the review page).
MAX_DIFF_LINES = 2_000
# Texts longer than this are not compared line by line: difflib's time grows faster than the
# text, and the review page shows the whole text anyway.
DIFF_MAX_CHARS = 100_000


@dataclass(frozen=True, slots=True)
class DiffLine:
    kind: str  # file | hunk | add | del | same
    text: str


@dataclass(frozen=True, slots=True)
class FileDiff:
    rel: str
    status: str  # added | removed | changed | same
    lines: tuple[DiffLine, ...] = ()
    binary: bool = False
    old: PackageFile | None = None
    new: PackageFile | None = None
    cut: bool = False
    too_long: bool = False  # a text too long to compare line by line (DIFF_MAX_CHARS)

    @property
    def is_script(self) -> bool:
        return bool((self.new or self.old) and (self.new or self.old).is_script)  # type: ignore[union-attr]


def unified_lines(
    before: str, after: str, *, fromfile: str, tofile: str, limit: int = MAX_DIFF_LINES
) -> tuple[tuple[DiffLine, ...], bool]:
    """The unified diff from `before` to `after` (3 lines of context), each line classified; cut
    after `limit` lines that are not the file headers (True when cut)."""
    raw = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=fromfile,
        tofile=tofile,
        n=3,
    )
    out: list[DiffLine] = []
    shown = 0
    for line in raw:
        text = line.rstrip("\n")
        if line.startswith(("+++", "---")) and shown == 0:
            out.append(DiffLine("file", text))
            continue
        if line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "same"
        out.append(DiffLine(kind, text))
        shown += 1
        if shown >= limit:
            return tuple(out), True
    return tuple(out), False


def status_of(old: PackageFile | None, new: PackageFile | None) -> str:
    """added | removed | changed | same."""
    if old is not None and new is not None and old.sha256 == new.sha256:
        return "same"
    return "added" if old is None else "removed" if new is None else "changed"


def diff_chars(old: PackageFile | None, new: PackageFile | None) -> int:
    """About how many characters the diff of two sides shows (0: none is shown)."""
    sides = [f for f in (old, new) if f is not None]
    if status_of(old, new) == "same" or any(f.text is None for f in sides):
        return 0
    lengths = [len(f.text or "") for f in sides]
    return 0 if max(lengths) > DIFF_MAX_CHARS else sum(lengths)


def diff_file(old: PackageFile | None, new: PackageFile | None, rel: str) -> FileDiff:
    """One file of two versions compared (either side None: only in the other)."""
    status = status_of(old, new)
    if status == "same":
        return FileDiff(rel, "same", old=old, new=new)
    if (old is not None and old.text is None) or (new is not None and new.text is None):
        return FileDiff(rel, status, binary=True, old=old, new=new)
    if not diff_chars(old, new):
        return FileDiff(rel, status, old=old, new=new, too_long=True)
    before = (old.text or "") if old is not None else ""
    after = (new.text or "") if new is not None else ""
    lines, cut = unified_lines(before, after, fromfile=f"a/{rel}", tofile=f"b/{rel}")
    body = tuple(line for line in lines if line.kind != "file")
    return FileDiff(rel, status, body, old=old, new=new, cut=cut)


def compare(old: Sequence[PackageFile], new: Sequence[PackageFile]) -> list[FileDiff]:
    """Every file of either version, changed ones first (SKILL.md, then scripts, then the rest)."""
    before = {f.rel: f for f in old}
    after = {f.rel: f for f in new}
    diffs = [diff_file(before.get(rel), after.get(rel), rel) for rel in sorted(before | after)]
    return sorted(diffs, key=reading_order)


def reading_order(d: FileDiff) -> tuple[int, int, str]:
    """Changed files first: SKILL.md, then scripts, then the rest, each by path."""
    return (
        d.status == "same",
        0 if d.rel.lower() == "skill.md" else 1 if d.is_script else 2,
        d.rel,
    )


__all__ = [
    "DIFF_MAX_CHARS",
    "MAX_DIFF_LINES",
    "DiffLine",
    "FileDiff",
    "compare",
    "diff_chars",
    "diff_file",
    "reading_order",
    "status_of",
    "unified_lines",
]
