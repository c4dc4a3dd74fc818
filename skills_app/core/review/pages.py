"""The review of a version in pages: every file reachable, none left out silently, no page huge.

Files are taken in path order. A page holds at most FILES_PER_PAGE files and CHARS_PER_PAGE
characters (a file's text plus the `extra` its diff adds). A file too long for one page is
split into parts at line ends, without its diff, each part filling a page or sharing one with
small files; a binary counts as one character (it is listed, not shown).

A version that would need more than MAX_PAGES pages, or whose manifest has more than
MAX_MANIFEST_ENTRIES entries, cannot be shown whole: `unshowable` says so in words, and the
version is refused for review (nobody approves what they cannot read).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .package import PackageFile

FILES_PER_PAGE = 200
CHARS_PER_PAGE = 500_000
MAX_PAGES = 200
MAX_MANIFEST_ENTRIES = 1_000


@dataclass(frozen=True, slots=True)
class PageItem:
    """One path of the review: its text in this version (None: a binary, or not in it), and
    the characters its diff adds to the page."""

    rel: str
    text: str | None
    extra: int = 0


@dataclass(frozen=True, slots=True)
class Piece:
    """One file, or one part of a long one, as a page shows it."""

    rel: str
    index: int  # the file's place among all the items, from 0
    part: int  # from 1
    parts: int
    start: int  # the part's characters in the file's text: text[start:end]
    end: int
    whole: bool  # the file fits on one page with its diff (parts == 1, diff shown)


@dataclass(frozen=True, slots=True)
class Page:
    number: int  # from 1
    pieces: tuple[Piece, ...]

    @property
    def first(self) -> int:
        """The place of its first file among all the files, from 1."""
        return self.pieces[0].index + 1 if self.pieces else 0

    @property
    def last(self) -> int:
        """The place of its last file among all the files, from 1."""
        return self.pieces[-1].index + 1 if self.pieces else 0


def split_text(text: str, limit: int) -> list[tuple[int, int]]:
    """Spans of at most `limit` characters covering `text`, cut after a line end when one
    falls in the second half of a span."""
    spans: list[tuple[int, int]] = []
    start = 0
    while start < len(text):
        end = min(start + limit, len(text))
        if end < len(text):
            cut = text.rfind("\n", start, end)
            if cut + 1 > start + limit // 2:
                end = cut + 1
        spans.append((start, end))
        start = end
    return spans or [(0, 0)]


def paginate(
    items: Sequence[PageItem],
    *,
    files_per_page: int = FILES_PER_PAGE,
    chars_per_page: int = CHARS_PER_PAGE,
) -> list[Page]:
    """Every item on a page, in order (see the module docstring); at least one page."""
    pages: list[list[Piece]] = [[]]
    used = 0

    def place(piece: Piece, weight: int) -> None:
        nonlocal used
        if pages[-1] and (len(pages[-1]) >= files_per_page or used + weight > chars_per_page):
            pages.append([])
            used = 0
        pages[-1].append(piece)
        used += weight

    for index, item in enumerate(items):
        text = item.text or ""
        weight = max(len(text) + item.extra, 1)
        if weight <= chars_per_page:
            place(Piece(item.rel, index, 1, 1, 0, len(text), True), weight)
            continue
        spans = split_text(text, chars_per_page)
        for part, (start, end) in enumerate(spans, 1):
            place(Piece(item.rel, index, part, len(spans), start, end, False), max(end - start, 1))
    return [Page(n, tuple(pieces)) for n, pieces in enumerate(pages, 1)]


def unshowable(files: Sequence[PackageFile], manifest_entries: int) -> str:
    """Why a version with these files and this many manifest entries cannot be shown whole to
    its reviewer ("" when it can), in words that say what to do."""
    pages = paginate([PageItem(f.rel, f.text) for f in files])
    if len(pages) > MAX_PAGES:
        chars = sum(len(f.text or "") for f in files)
        return (
            f"it cannot be shown whole to a reviewer: its {len(files):,} files and {chars:,} "
            f"characters of text need {len(pages):,} pages of review, and the review shows at "
            f"most {MAX_PAGES} ({FILES_PER_PAGE} files or {CHARS_PER_PAGE:,} characters each). "
            "Remove files or split it into smaller skills, then upload it as a new version"
        )
    if manifest_entries > MAX_MANIFEST_ENTRIES:
        return (
            f"it cannot be shown whole to a reviewer: its command manifest has "
            f"{manifest_entries:,} entries, and the review shows at most "
            f"{MAX_MANIFEST_ENTRIES:,}. Ask the model to run fewer commands in SKILL.md and the "
            "documents it points at, then upload it as a new version"
        )
    return ""


__all__ = [
    "CHARS_PER_PAGE",
    "FILES_PER_PAGE",
    "MAX_MANIFEST_ENTRIES",
    "MAX_PAGES",
    "Page",
    "PageItem",
    "Piece",
    "paginate",
    "split_text",
    "unshowable",
]
