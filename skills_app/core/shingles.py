"""Hidden texts made searchable: normalised (whitespace and line prefixes as one space) and
sampled as window hashes (`Shingles`), built once per text and shared between indexes.

The choices (MIN_SPAN, WINDOW and STRIDE, the whitespace rule, the sum hash and its bitmap) are
explained in `redact.py`, which finds and withholds the spans with them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

MIN_SPAN = 40
WINDOW = 20
STRIDE = MIN_SPAN - WINDOW + 1
DEFAULT_LABEL = "hidden skill text"
# The line prefixes of Read (`cat -n` style) and Grep content results.
_PREFIX = re.compile(r"^(?:[ ]*\d+\t|[^\s:]+:\d+:)", re.MULTILINE)
_READ_PREFIX = re.compile(r"^[ ]*\d+\t", re.MULTILINE)
_GREP_MARK = re.compile(r":\d+:")
# What str.split() and the regex `\s` both call whitespace (tests/core/test_redact.py checks it).
WHITESPACE = (
    (0x9, 0xA, 0xB, 0xC, 0xD, 0x1C, 0x1D, 0x1E, 0x1F, 0x20, 0x85, 0xA0, 0x1680)
    + tuple(range(0x2000, 0x200B))
    + (0x2028, 0x2029, 0x202F, 0x205F, 0x3000)
)
_SPACES = np.array(WHITESPACE, dtype=np.uint32)

U32 = npt.NDArray[np.uint32]
U64 = npt.NDArray[np.uint64]
Mask = npt.NDArray[np.bool_]
# Fixed seed: the same text hashes the same in every process (an index could be shared).
# 32 bits: half the memory traffic of 64, and a collision only costs one comparison.
_TABLE: U32 = np.random.default_rng(0x5EC2E7).integers(
    0, np.iinfo(np.uint32).max, size=1 << 16, dtype=np.uint32, endpoint=True
)
_MIX = np.uint32(0x9E3779B1)
_NO_HASHES: U32 = np.zeros(0, dtype=np.uint32)
_NO_LOCATIONS: U64 = np.zeros(0, dtype=np.uint64)
_positions: U32 = np.arange(1 << 16, dtype=np.uint32)


@dataclass(frozen=True, slots=True)
class HiddenText:
    """One hidden text and what to call it in the placeholder."""

    text: str
    label: str = DEFAULT_LABEL


# -- normalising ------------------------------------------------------------------------------


def _has_prefix(text: str) -> bool:
    # Cheap tests first: a Read prefix needs a tab, a Grep prefix ":<digits>:".
    if "\t" in text and _READ_PREFIX.search(text):
        return True
    return bool(_GREP_MARK.search(text)) and bool(_PREFIX.search(text))


def normal_form(text: str) -> str:
    """`text` with every gap (whitespace, line prefixes) made one space."""
    stripped = _PREFIX.sub(" ", text) if _has_prefix(text) else text
    words = stripped.split()
    if not words:
        return " " if stripped else ""
    norm = " ".join(words)
    if stripped[0].isspace():
        norm = " " + norm
    if stripped[-1].isspace():
        norm += " "
    return norm


def _codes(text: str) -> npt.NDArray[np.uint32]:
    # surrogatepass: text decoded with surrogateescape (downloads) or JSON may hold lone ones.
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")


def original_positions(text: str) -> npt.NDArray[np.intp]:
    """The original index of each character of `normal_form(text)`."""
    space = np.isin(_codes(text), _SPACES)
    if _has_prefix(text):
        # Line prefixes count as gap characters too (marked by +1 at a start, -1 at an end).
        found = [(m.start(), m.end()) for m in _PREFIX.finditer(text)]
        marks = np.zeros(len(space) + 1, dtype=np.int32)
        np.add.at(marks, [start for start, _end in found], 1)
        np.add.at(marks, [end for _start, end in found], -1)
        space |= np.cumsum(marks[:-1]) > 0
    keep = ~space
    keep[1:] |= space[1:] & ~space[:-1]  # the first character of each gap stands for it
    if len(keep):
        keep[0] = True
    return np.flatnonzero(keep)


def normalise(text: str) -> tuple[str, npt.NDArray[np.intp]]:
    """(normalised text, original index of each of its characters); see the module docstring."""
    return normal_form(text), original_positions(text)


# -- hashing ----------------------------------------------------------------------------------


def _arange(n: int) -> U32:
    """0..n-1 (a shared array, grown on demand: allocating it per call cost a third)."""
    global _positions
    if len(_positions) < n:
        _positions = np.arange(max(n, 2 * len(_positions)), dtype=np.uint32)
    return _positions[:n]


def window_hashes(norm: str) -> U32:
    """The hash of the WINDOW characters starting at each position of a normalised text.

    Sum hash from running sums (arithmetic mod 2**32): s1 = sum of f(c), s2 = sum of f(c) times
    its place in the window; both are differences of prefix sums, so every position costs a few
    array operations, and the hash of a window does not depend on where it starts.
    """
    n = len(norm)
    if n < WINDOW:
        return _NO_HASHES
    f = _TABLE[_codes(norm) & 0xFFFF]
    places = _arange(n)
    sums = np.zeros(n + 1, dtype=np.uint32)
    np.cumsum(f, out=sums[1:])
    weighted = np.zeros(n + 1, dtype=np.uint32)
    np.cumsum(f * places, out=weighted[1:])
    s1 = sums[WINDOW:] - sums[:-WINDOW]
    s2 = weighted[WINDOW:] - weighted[:-WINDOW] - places[: n - WINDOW + 1] * s1
    hashed: U32 = (s1 * _MIX) ^ s2
    return hashed


# -- the sampled hashes of hidden texts -------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class Shingles:
    """Sampled window hashes of some hidden texts: immutable, built once, shared between indexes."""

    texts: tuple[str, ...]  # normalised
    labels: tuple[str, ...]
    hashes: U32  # sorted
    locations: U64  # text index << 32 | offset, in the order of `hashes`
    bitmap: Mask  # bitmap[hash >> shift]: some sampled window may have this hash
    shift: int

    @property
    def chars(self) -> int:
        """Characters of hidden text held (for cache accounting)."""
        return sum(len(t) for t in self.texts)

    @classmethod
    def build(cls, hidden: Iterable[HiddenText | str]) -> Shingles:
        """Normalise and sample the texts (those shorter than MIN_SPAN can never be withheld)."""
        texts: list[str] = []
        labels: list[str] = []
        hashes: list[U32] = []
        locations: list[U64] = []
        for item in hidden:
            entry = item if isinstance(item, HiddenText) else HiddenText(item)
            norm = normal_form(entry.text)
            if len(norm) < MIN_SPAN:
                continue
            sampled = window_hashes(norm)[::STRIDE]
            index = np.uint64(len(texts)) << np.uint64(32)
            offsets = np.arange(0, len(sampled) * STRIDE, STRIDE, dtype=np.uint64)
            texts.append(norm)
            labels.append(entry.label)
            hashes.append(sampled)
            locations.append(offsets | index)
        return cls._assemble(texts, labels, hashes, locations)

    @classmethod
    def merge(cls, parts: Sequence[Shingles]) -> Shingles:
        """One set of shingles holding all of `parts` (texts renumbered, nothing re-hashed)."""
        texts: list[str] = []
        labels: list[str] = []
        hashes: list[U32] = []
        locations: list[U64] = []
        for part in parts:
            shift = np.uint64(len(texts)) << np.uint64(32)
            texts.extend(part.texts)
            labels.extend(part.labels)
            hashes.append(part.hashes)
            locations.append(part.locations + shift)
        return cls._assemble(texts, labels, hashes, locations)

    @classmethod
    def _assemble(
        cls, texts: list[str], labels: list[str], hashes: list[U32], locations: list[U64]
    ) -> Shingles:
        all_hashes = np.concatenate(hashes) if hashes else _NO_HASHES
        all_locations = np.concatenate(locations) if locations else _NO_LOCATIONS
        # Stable: equal hashes keep the texts' order, so the first text wins a tie as before.
        order = np.argsort(all_hashes, kind="stable")
        bits = max(10, min(24, (len(all_hashes) * 16).bit_length()))
        bitmap = np.zeros(1 << bits, dtype=np.bool_)
        sorted_hashes = all_hashes[order]
        bitmap[sorted_hashes >> np.uint32(32 - bits)] = True
        return cls(
            texts=tuple(texts),
            labels=tuple(labels),
            hashes=sorted_hashes,
            locations=all_locations[order],
            bitmap=bitmap,
            shift=32 - bits,
        )
