"""The visibility filter's core: find verbatim spans of hidden text inside outgoing text.

Hidden text is what a person without the "inspect injected content" permission must not read:
skill bodies as injected, every staged skill file (SKILL.md and the files beside it, unless an
admin marked the skill "source visible to users"), and `!` dynamic-context commands and output.
Outgoing text is anything that leaves the server for such a person: a tool result, an error, an
approval prompt, an export. `HiddenIndex(hidden).redact(text)` replaces every span of `text`
that also occurs in a hidden text, once at least MIN_SPAN characters long, with a placeholder
such as ``[hidden skill text withheld: 1,234 characters]``; `contains_hidden` says whether there
was any (the audit marks an answer in which the model quoted hidden text; its own prose is not
rewritten).

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
- The viewer's own words are never withheld from them. `HiddenIndex(hidden, own=...)` takes
  the texts the viewer wrote (their messages, the arguments of their `/name` commands, the names
  of files they attached): where one of them (at least OWN_MIN characters) sits inside a
  withheld span of the outgoing text, that part is shown and the rest of the span is still
  withheld, however short (a leftover of only punctuation is shown: it says nothing). Shorter own texts are not carved out: a one-letter message must not
  reveal where that letter sits in a skill's instructions.
- Linear time. Every hidden text is indexed by windows of WINDOW characters taken every STRIDE
  characters (WINDOW + STRIDE - 1 <= MIN_SPAN, so any common span of MIN_SPAN characters holds
  one whole indexed window). The outgoing text is scanned once, one window per position, a
  dict lookup each; a hit is verified and extended character by character against its hidden
  text, and scanning resumes after it. Hash collisions cost a comparison, never a wrong answer.
  Index memory is about one entry per STRIDE hidden characters.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterable
from dataclasses import dataclass

MIN_SPAN = 40
OWN_MIN = 10
WINDOW = 24
STRIDE = 16
DEFAULT_LABEL = "hidden skill text"
# Whitespace runs, and the line prefixes of Read (`cat -n` style) and Grep content results.
# The prefixes come first: after a newline the next round must try them before `\s` eats a space.
_GAP = re.compile(r"(?:^[ ]*\d+\t|^[^\s:]+:\d+:|\s)+", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class HiddenText:
    """One hidden text and what to call it in the placeholder."""

    text: str
    label: str = DEFAULT_LABEL


@dataclass(frozen=True, slots=True)
class Span:
    """A withheld part of an outgoing text: [start, end) in its original characters."""

    start: int
    end: int
    label: str


def normalise(text: str) -> tuple[str, array[int]]:
    """(normalised text, original index of each of its characters); see the module docstring."""
    pieces: list[str] = []
    origin: array[int] = array("q")
    cursor = 0
    for gap in _GAP.finditer(text):
        if gap.start() > cursor:
            pieces.append(text[cursor : gap.start()])
            origin.extend(range(cursor, gap.start()))
        pieces.append(" ")
        origin.append(gap.start())
        cursor = gap.end()
    if cursor < len(text):
        pieces.append(text[cursor:])
        origin.extend(range(cursor, len(text)))
    return "".join(pieces), origin


def placeholder(label: str, size: int) -> str:
    """What replaces a withheld span."""
    return f"[{label} withheld: {size:,} characters]"


class HiddenIndex:
    """The hidden texts of one conversation (or one page), indexed for `spans` and `redact`."""

    def __init__(self, hidden: Iterable[HiddenText | str], *, own: Iterable[str] = ()) -> None:
        # Longest first: a message that holds a shorter own text is carved out whole.
        self._own = sorted(
            {o.strip() for o in own if isinstance(o, str) and len(o.strip()) >= OWN_MIN},
            key=len,
            reverse=True,
        )
        self._texts: list[str] = []
        self._labels: list[str] = []
        self._windows: dict[str, tuple[int, int] | list[tuple[int, int]]] = {}
        for item in hidden:
            entry = item if isinstance(item, HiddenText) else HiddenText(item)
            norm = normalise(entry.text)[0]
            if len(norm) < MIN_SPAN:
                continue  # nothing of it could ever be withheld
            source = len(self._texts)
            self._texts.append(norm)
            self._labels.append(entry.label)
            for offset in range(0, len(norm) - WINDOW + 1, STRIDE):
                self._add(norm[offset : offset + WINDOW], (source, offset))

    def _add(self, key: str, where: tuple[int, int]) -> None:
        # Most windows occur once; only repeated ones pay for a list.
        found = self._windows.get(key)
        if found is None:
            self._windows[key] = where
        elif isinstance(found, list):
            if len(found) < 8:  # a window repeated more often adds nothing new to find
                found.append(where)
        else:
            self._windows[key] = [found, where]

    def __bool__(self) -> bool:
        return bool(self._texts)

    def spans(self, text: str) -> list[Span]:
        """The withheld spans of `text`, in order, merged where they touch."""
        if not self._texts or len(text) < MIN_SPAN:
            return []
        norm, origin = normalise(text)
        found: list[tuple[int, int, str]] = []  # normalised [start, end), label
        i, last = 0, len(norm) - WINDOW
        windows = self._windows
        while i <= last:
            hit = windows.get(norm[i : i + WINDOW])
            if hit is None:
                i += 1
                continue
            best = self._extend(norm, i, hit, found[-1][1] if found else 0)
            if best is None:
                i += 1
                continue
            start, end, label = best
            if found and start <= found[-1][1]:
                prev = found.pop()
                start, label = prev[0], prev[2]
                end = max(end, prev[1])
            found.append((start, end, label))
            i = max(i + 1, end - WINDOW + 1)
        out: list[Span] = []
        for start, end, label in found:
            if end - start < MIN_SPAN:
                continue
            # The whitespace at either edge stays, so the placeholder keeps its neighbours apart.
            start += norm[start] == " "
            end -= norm[end - 1] == " "
            out.append(Span(origin[start], origin[end - 1] + 1, label))
        return self._carve(text, out) if self._own and out else out

    def _carve(self, text: str, spans: list[Span]) -> list[Span]:
        """The spans without the viewer's own words; what is left of a span stays withheld."""
        mine: list[tuple[int, int]] = []
        for own in self._own:
            at = text.find(own)
            while at != -1:
                if not any(s <= at < e for s, e in mine):
                    mine.append((at, at + len(own)))
                at = text.find(own, at + len(own))
        if not mine:
            return spans
        mine.sort()
        out: list[Span] = []
        for span in spans:
            cursor = span.start
            for start, end in mine:
                if end <= cursor or start >= span.end:
                    continue
                if start > cursor and _worded(text[cursor:start]):
                    out.append(Span(cursor, start, span.label))
                cursor = max(cursor, end)
            if cursor < span.end and _worded(text[cursor : span.end]):
                out.append(Span(cursor, span.end, span.label))
        return out

    def _extend(
        self,
        norm: str,
        at: int,
        hit: tuple[int, int] | list[tuple[int, int]],
        floor: int,
    ) -> tuple[int, int, str] | None:
        """The longest verified common span through norm[at:at+WINDOW], or None."""
        best: tuple[int, int, str] | None = None
        for source, offset in hit if isinstance(hit, list) else [hit]:
            hidden = self._texts[source]
            if hidden[offset : offset + WINDOW] != norm[at : at + WINDOW]:
                continue  # a hash collision inside the dict cannot happen, but be exact
            left = 0
            while at - left > floor and offset - left > 0:
                if norm[at - left - 1] != hidden[offset - left - 1]:
                    break
                left += 1
            right = WINDOW
            limit = min(len(norm) - at, len(hidden) - offset)
            while right < limit and norm[at + right] == hidden[offset + right]:
                right += 1
            if best is None or right + left > best[1] - best[0]:
                best = (at - left, at + right, self._labels[source])
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


def _worded(piece: str) -> bool:
    """A leftover of a carved span worth withholding: it holds a letter or a digit (a quote mark
    or a bracket next to the viewer's own words tells them nothing)."""
    return any(c.isalnum() for c in piece)


def redact(text: str, hidden: Iterable[HiddenText | str]) -> str:
    """One-off `HiddenIndex(hidden).redact(text)`; build the index once when filtering many texts."""
    return HiddenIndex(hidden).redact(text)
