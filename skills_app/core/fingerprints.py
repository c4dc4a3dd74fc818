"""Fingerprints of a text: a few 64-bit hashes that two texts share when they share a long span.

What tells another person's words inside an MCP call's arguments (`skills_app.sent_texts`):
each stored message and attached file keeps its fingerprints, and a call's strings are
fingerprinted the same way and looked up.

Winnowing (Schleimer, Wilkerson and Aiken, SIGMOD 2003): hash every SPAN-character window of
the normalised text (whitespace and line prefixes as one space, as the hidden-content filter
reads text), then keep the smallest hash of every PICK consecutive windows. The choice depends
only on the characters, not on where the span sits in either text, so two texts sharing a span
of GUARANTEED characters or more always keep one hash in common, and a hash in common means a
common span of at least SPAN characters (64-bit hashes: a false match is not a practical
concern). Shorter spans are never matched: short phrases ("thank you for your help") are
everyone's. About one hash is kept per PICK / 2 characters.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

from skills_app.core.shingles import normal_form

SPAN = 64
PICK = 32
GUARANTEED = SPAN + PICK - 1

_BASE = np.uint64(0x100000001B3)  # odd, so it has an inverse modulo 2**64
_BASE_INVERSE = np.uint64(pow(0x100000001B3, -1, 1 << 64))
_MIX = np.uint64(0x9E3779B97F4A7C15)

U64 = npt.NDArray[np.uint64]


def _window_hashes(norm: str) -> U64:
    """The polynomial hash (mod 2**64) of the SPAN characters starting at each position."""
    codes = np.frombuffer(norm.encode("utf-32-le", "surrogatepass"), dtype="<u4").astype(np.uint64)
    n = len(codes)
    # prefix[m] = sum of codes[j] * BASE**(m-1-j) for j < m, as BASE**(m-1) times a cumulative
    # sum of codes[j] * BASE**-j: every position at once, wrapping modulo 2**64.
    with np.errstate(over="ignore"):
        up = np.cumprod(np.full(n + 1, _BASE, dtype=np.uint64))
        up[1:] = up[:-1]
        up[0] = 1
        down = np.cumprod(np.full(n, _BASE_INVERSE, dtype=np.uint64))
        down[1:] = down[:-1]
        down[0] = 1
        prefix = np.zeros(n + 1, dtype=np.uint64)
        prefix[1:] = up[:n] * np.cumsum(codes * down)
        hashes: U64 = prefix[SPAN:] - prefix[: n - SPAN + 1] * up[SPAN]
        # Mixed, so the smallest of a run of hashes is no particular kind of text.
        hashes ^= hashes >> np.uint64(31)
        hashes *= _MIX
        hashes ^= hashes >> np.uint64(29)
    return hashes


def fingerprints(text: str) -> frozenset[int]:
    """The winnowed hashes of `text` (signed 64-bit, as a database keeps them); empty when its
    normalised form is shorter than SPAN."""
    norm = normal_form(text)
    if len(norm) < SPAN:
        return frozenset()
    hashes = _window_hashes(norm)
    if len(hashes) > PICK:
        hashes = np.lib.stride_tricks.sliding_window_view(hashes, PICK).min(axis=1)
    else:
        hashes = hashes[[int(hashes.argmin())]]
    return frozenset(int(h) for h in np.unique(hashes).view(np.int64))


def all_fingerprints(texts: Iterable[str]) -> frozenset[int]:
    """The fingerprints of every text."""
    found: set[int] = set()
    for text in texts:
        found |= fingerprints(text)
    return frozenset(found)
