"""The visibility filter's core: find verbatim spans of hidden text inside outgoing text.

Hidden text is what a person without the "inspect injected content" permission must not read:
skill bodies as injected, every file of every skill offered or staged (SKILL.md and the files
beside it, unless the viewer may read that skill's source), and `!` dynamic-context commands and
output. Outgoing text is anything that leaves the server for such a person: a tool result, an
error, an approval prompt, an export. `HiddenIndex(hidden).redact(text)` replaces every span of
`text` that also occurs in a hidden text, once at least MIN_SPAN characters long, with a
placeholder such as ``[hidden skill text withheld: 1,234 characters]``; `contains_hidden` says
whether there was any (the audit marks an answer in which the model quoted hidden text; its own
prose is not rewritten).

Choices, and why:

- MIN_SPAN = 40 characters. A sentence of an instruction is longer than that, so quoting any
  real part of a skill is caught; shared short strings (a file name, `import os`, a common
  phrase of six words) are shorter, so ordinary answers are not shredded. Shorter pieces are
  not hidden: text cut into pieces of under 40 characters, or transformed (translated,
  re-encoded, summarised), gets through. This filter stops verbatim display, not a determined
  user steering the model; see docs/security.md.
- Whitespace does not count: every run of whitespace (spaces, tabs, CR/LF, CRLF vs LF) is one
  space on both sides, and the line-number prefixes our Read (``   12<TAB>``) and Grep
  (``path:12:``) results add at the start of a line are treated as whitespace too. So a Read of
  SKILL.md, whose short lines each carry a prefix, is still one long hidden span. Lengths are
  counted on this normalised text.
- Fast with hundreds of skills indexed. Each hidden text is sampled: the hash of the WINDOW
  characters starting at every STRIDE-th position (WINDOW + STRIDE - 1 = MIN_SPAN, so any
  common span of MIN_SPAN characters holds one whole sampled window). The outgoing text gets the
  hash of the window at *every* position, computed for all positions at once with numpy (a
  position-independent sum hash from two running sums), and each hash is looked up in a bitmap
  of the sampled hashes, then in their sorted array: no Python work per character, and the cost
  does not grow with the number of hidden texts (one lookup per position, whatever the index
  holds). Only a hit is verified against its hidden text and extended (slice comparisons that
  double, then halve), and the scan resumes after it. A hash collision costs a comparison,
  never a wrong answer. Memory: 12 bytes per STRIDE hidden characters plus the bitmap (at most
  16 MB) and the normalised texts themselves. Measured in bench/bench_redact.py.
- The viewer's own words are not for this module to judge: the services split the texts that
  repeat them (a skill's body with a person's arguments substituted) before indexing
  (`hidden.py`). Carving them out of any withheld span at the end answered "is this guess in
  the hidden text?", which no one may ask. OWN_MIN is the shortest text counted as one's words:
  a one-letter message must not cut a skill's text into unindexed pieces.
- Built once, reused (`shingles.py`). `Shingles` (the sampled hashes of some texts) are immutable: the services
  build them once per skill version (keyed by its content digest) and combine them into one
  `HiddenIndex` per conversation with `HiddenIndex.of`, each part with an optional mask of the
  texts that are hidden from the viewer at hand.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from skills_app.core.shingles import (
    DEFAULT_LABEL,
    MIN_SPAN,
    STRIDE,
    WHITESPACE,
    WINDOW,
    HiddenText,
    Mask,
    Shingles,
    normal_form,
    normalise,
    original_positions,
    window_hashes,
)

# Re-exported: the callers of the filter name them from here.
__all__ = [
    "DEFAULT_LABEL",
    "MIN_SPAN",
    "OWN_MIN",
    "STRIDE",
    "WHITESPACE",
    "WINDOW",
    "HiddenIndex",
    "HiddenText",
    "Shingles",
    "Span",
    "normalise",
    "placeholder",
    "redact",
]

OWN_MIN = 10
# Locations verified per window: a window repeated more often adds nothing new to find.
MAX_LOCATIONS = 8
# Entries sharing one hash looked at, hidden or not (bounds the work on a popular window).
MAX_PROBES = 64
# Outgoing characters hashed at a time (about 40 bytes of arrays per character).
CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class Span:
    """A withheld part of an outgoing text: [start, end) in its original characters."""

    start: int
    end: int
    label: str


# Sorted outgoing positions whose window may be a sampled one, with the part and the entry.
_Hits = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]


class HiddenIndex:
    """The hidden texts of one conversation (or one page), indexed for `spans` and `redact`."""

    def __init__(self, hidden: Iterable[HiddenText | str] = ()) -> None:
        self._parts: list[tuple[Shingles, Mask | None]] = []
        built = Shingles.build(hidden)
        if built.texts:
            self._parts.append((built, None))

    @classmethod
    def of(cls, parts: Iterable[tuple[Shingles, Mask | None]]) -> HiddenIndex:
        """An index over prepared shingles; a mask marks which of a part's texts are hidden."""
        index = cls()
        for shingles, mask in parts:
            if shingles.texts and (mask is None or bool(mask.any())):
                index._parts.append((shingles, mask))
        return index

    def __bool__(self) -> bool:
        return bool(self._parts)

    def spans(self, text: str) -> list[Span]:
        """The withheld spans of `text`, in order, merged where they touch."""
        if not self._parts or len(text) < MIN_SPAN:
            return []
        norm = normal_form(text)
        if len(norm) < MIN_SPAN:
            return []
        found = self._found(norm, self._hits(norm))
        kept = [(s, e, label) for s, e, label in found if e - s >= MIN_SPAN]
        if not kept:
            return []
        origin = original_positions(text)
        out: list[Span] = []
        for start, end, label in kept:
            # The whitespace at either edge stays, so the placeholder keeps its neighbours apart.
            start += norm[start] == " "
            end -= norm[end - 1] == " "
            out.append(Span(int(origin[start]), int(origin[end - 1]) + 1, label))
        return out

    def _hits(self, norm: str) -> _Hits:
        """Positions whose window hash is a sampled hash of some part, in order."""
        positions: list[npt.NDArray[np.int64]] = []
        numbers: list[npt.NDArray[np.int64]] = []
        entries: list[npt.NDArray[np.int64]] = []
        # In pieces (overlapping by a window): the arrays of one piece stay a few tens of MB
        # whatever the size of the text (a download is checked whole).
        for first in range(0, max(1, len(norm) - WINDOW + 1), CHUNK):
            hashes = window_hashes(norm[first : first + CHUNK + WINDOW - 1])
            for number, (part, _mask) in enumerate(self._parts):
                maybe = np.flatnonzero(part.bitmap[hashes >> np.uint32(part.shift)])
                if not len(maybe):
                    continue
                wanted = hashes[maybe]
                at = np.searchsorted(part.hashes, wanted)
                inside = at < len(part.hashes)
                maybe, wanted, at = maybe[inside], wanted[inside], at[inside]
                equal = part.hashes[at] == wanted
                positions.append(maybe[equal].astype(np.int64) + first)
                numbers.append(np.full(int(equal.sum()), number, dtype=np.int64))
                entries.append(at[equal].astype(np.int64))
        if not positions:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, empty
        all_positions = np.concatenate(positions)
        order = np.argsort(all_positions, kind="stable")
        return all_positions[order], np.concatenate(numbers)[order], np.concatenate(entries)[order]

    def _found(self, norm: str, hits: _Hits) -> list[tuple[int, int, str]]:
        """Common spans (normalised [start, end), label), merged where they touch."""
        positions, numbers, entries = hits
        found: list[tuple[int, int, str]] = []
        resume = 0
        i, count = 0, len(positions)
        while i < count:
            position = int(positions[i])
            if position < resume:
                # Inside a span already found: jump past it (a whole file read back is a hit
                # every STRIDE characters, none of which needs a look).
                i = int(np.searchsorted(positions, resume))
                continue
            j = i
            while j < count and positions[j] == position:
                j += 1
            here = [(int(numbers[k]), int(entries[k])) for k in range(i, j)]
            i = j
            best = self._extend(norm, position, here, found[-1][1] if found else 0)
            if best is None:
                continue  # hash collisions only
            start, end, label = best
            if found and start <= found[-1][1]:
                prev = found.pop()
                start, label = prev[0], prev[2]
                end = max(end, prev[1])
            found.append((start, end, label))
            resume = max(position + 1, end - WINDOW + 1)
        return found

    def _locations(self, entries: list[tuple[int, int]]) -> Iterable[tuple[str, int, str]]:
        """(hidden text, offset, label) of the hidden windows behind a hit, capped."""
        for number, first in entries:
            part, mask = self._parts[number]
            wanted = part.hashes[first]
            kept = 0
            stop = min(len(part.hashes), first + MAX_PROBES)
            for entry in range(first, stop):
                if part.hashes[entry] != wanted or kept >= MAX_LOCATIONS:
                    break
                location = int(part.locations[entry])
                text = location >> 32
                if mask is not None and not mask[text]:
                    continue  # the viewer may read this one
                kept += 1
                yield part.texts[text], location & 0xFFFFFFFF, part.labels[text]

    def _extend(
        self, norm: str, at: int, entries: list[tuple[int, int]], floor: int
    ) -> tuple[int, int, str] | None:
        """The longest verified common span through norm[at:at+WINDOW], or None."""
        best: tuple[int, int, str] | None = None
        window = norm[at : at + WINDOW]
        for hidden, offset, label in self._locations(entries):
            if hidden[offset : offset + WINDOW] != window:
                continue  # a hash collision
            left = _backward(norm, at, hidden, offset, max(0, min(at - floor, offset)))
            limit = min(len(norm) - at, len(hidden) - offset) - WINDOW
            right = WINDOW + _forward(norm, at + WINDOW, hidden, offset + WINDOW, limit)
            if best is None or right + left > best[1] - best[0]:
                best = (at - left, at + right, label)
        return best

    def contains_hidden(self, text: str) -> bool:
        """True when `text` holds a verbatim span of hidden text (for marking an answer)."""
        return bool(self.spans(text))

    def redact(self, text: str) -> str:
        """`text` with every hidden span replaced by a placeholder; unchanged when there is none."""
        spans = self.spans(text)
        if not spans:
            return text
        parts: list[str] = []
        cursor = 0
        for span in spans:
            parts += [text[cursor : span.start], placeholder(span.label, span.end - span.start)]
            cursor = span.end
        parts.append(text[cursor:])
        return "".join(parts)


def _forward(a: str, i: int, b: str, j: int, limit: int) -> int:
    """The length of the longest common prefix of a[i:] and b[j:], at most `limit`."""
    done, step = 0, 16
    while done < limit:
        size = min(step, limit - done)
        if a[i + done : i + done + size] == b[j + done : j + done + size]:
            done, step = done + size, step * 2
            continue
        while size > 1:  # the first difference lies in this piece: halve it
            half = size // 2
            if a[i + done : i + done + half] == b[j + done : j + done + half]:
                done, size = done + half, size - half
            else:
                size = half
        return done
    return done


def _backward(a: str, i: int, b: str, j: int, limit: int) -> int:
    """The length of the longest common suffix of a[:i] and b[:j], at most `limit`."""
    done, step = 0, 16
    while done < limit:
        size = min(step, limit - done)
        if a[i - done - size : i - done] == b[j - done - size : j - done]:
            done, step = done + size, step * 2
            continue
        while size > 1:
            half = size // 2
            if a[i - done - half : i - done] == b[j - done - half : j - done]:
                done, size = done + half, size - half
            else:
                size = half
        return done
    return done


def placeholder(label: str, size: int) -> str:
    """What replaces a withheld span."""
    return f"[{label} withheld: {size:,} characters]"


def redact(text: str, hidden: Iterable[HiddenText | str]) -> str:
    """One-off `HiddenIndex(hidden).redact(text)`; build the index once when filtering many texts."""
    return HiddenIndex(hidden).redact(text)
