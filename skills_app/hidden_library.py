"""Skill files as hidden text: indexed once per skill version, shared by every conversation.

A skill version's files are known by its content digest (the registry's, which is also an
upload's `SkillVersion.digest` and the staged copy's marker), so their `Shingles` are built
once per digest and process and never go stale: `version_shingles`. The *library* merges the
versions every user is offered (the bundled and folder skills and the organisation's uploads,
shadowed ones included) into one set of shingles, rebuilt only when that set of digests changes;
each conversation then masks the library's texts its viewer may read (see `hidden.py`).

Memory and processes: each process builds what it uses (nothing to coordinate: the index is a
function of the files). The texts are kept normalised (about one byte per character for
ASCII) with 12 bytes per 21 characters of hashes; VERSION_CACHE_CHARS bounds the versions kept
and LIBRARY_MAX_CHARS the library (past it, skills are left out and logged; docs/security.md).
Files over FILE_MAX_BYTES, binary files and links are not indexed (a Read shows them neither).
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from skills_app.core.shingles import HiddenText, Shingles
from skills_app.core.skillfile import SkillSpec

logger = logging.getLogger(__name__)

FILE_MAX_BYTES = 2 * 1024 * 1024
# At least every file an upload may hold (UPLOAD_MAX_FILES): a file past the cap would not be
# filtered, so a Read of it would show hidden text to a person who may not see it.
MAX_FILES_PER_SKILL = 2_000
VERSION_CACHE_CHARS = 128 * 1024 * 1024
LIBRARY_MAX_CHARS = 96 * 1024 * 1024
# How long a library is trusted before the skill folders are listed again (the packages'
# fingerprint, checked on every use, catches uploads at once; a staged or invoked version the
# library lacks is indexed by its conversation anyway).
RECHECK_SECONDS = 2.0

_lock = threading.Lock()
_versions: OrderedDict[str, Shingles] = OrderedDict()


def file_label(name: str, relative: str) -> str:
    """What a withheld span of this file is called in its placeholder."""
    return f"hidden skill file {name}/{relative}"


def version_shingles(key: str, name: str, folder: Path | None) -> Shingles:
    """The shingles of one skill version's files, built on first use (`key`: its digest)."""
    with _lock:
        cached = _versions.get(key)
        if cached is not None:
            _versions.move_to_end(key)
            return cached
    built = Shingles.build(
        HiddenText(text, file_label(name, relative)) for relative, text in skill_file_texts(folder)
    )
    with _lock:
        _versions[key] = built
        total = sum(s.chars for s in _versions.values())
        while len(_versions) > 1 and total > VERSION_CACHE_CHARS:
            _key, dropped = _versions.popitem(last=False)
            total -= dropped.chars
    return built


@dataclass(frozen=True, slots=True, eq=False)
class Library:
    """The shared skills' files in one set of shingles, and where each version's texts are."""

    key: tuple[str, ...]  # the digests, sorted
    shingles: Shingles
    ranges: dict[str, tuple[int, int]]  # digest -> [first, end) of its texts


@dataclass(slots=True)
class _Current:
    library: Library
    fingerprint: object
    checked: float


_current: _Current | None = None


def library(fingerprint: object) -> Library:
    """The library of the skills everyone is offered (`fingerprint`: the packages' state)."""
    global _current
    from skills_app.registry.skills import get_registry, skills_for_user

    current = _current
    registry = get_registry()
    now = time.monotonic()
    if (
        current is not None
        and current.fingerprint == (id(registry), fingerprint)
        and now - current.checked < RECHECK_SECONDS
    ):
        return current.library
    specs = skills_for_user(None).candidates()
    key = tuple(sorted({s.digest for s in specs if s.digest}))
    if current is not None and current.library.key == key:
        built = current.library
    else:
        built = _build_library(specs, key)
    with _lock:
        _current = _Current(built, (id(registry), fingerprint), now)
    return built


def _build_library(specs: list[SkillSpec], key: tuple[str, ...]) -> Library:
    parts: list[Shingles] = []
    ranges: dict[str, tuple[int, int]] = {}
    texts = chars = 0
    for spec in specs:
        if not spec.digest or spec.digest in ranges:
            continue
        shingles = version_shingles(spec.digest, spec.name, Path(spec.path))
        if chars + shingles.chars > LIBRARY_MAX_CHARS:
            logger.warning(
                "skill %s is not indexed as hidden text: the library holds %d characters already",
                spec.name,
                chars,
            )
            continue
        parts.append(shingles)
        ranges[spec.digest] = (texts, texts + len(shingles.texts))
        texts += len(shingles.texts)
        chars += shingles.chars
    return Library(key=key, shingles=Shingles.merge(parts), ranges=ranges)


def forget() -> None:
    """Drop every cached version and the library (tests, and after bulk changes)."""
    global _current
    with _lock:
        _versions.clear()
        _current = None


def skill_file_texts(folder: Path | None) -> Iterator[tuple[str, str]]:
    """(path relative to the folder, text) of each regular text file, never through a link."""
    if folder is None:
        return
    count = 0
    most = max(MAX_FILES_PER_SKILL, settings.UPLOAD_MAX_FILES)
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for filename in sorted(filenames):
            count += 1
            if count > most:
                logger.warning(
                    "skill folder %s: files past the %d-th are not indexed", folder, most
                )
                return
            path = Path(dirpath) / filename
            text = _read_text(path)
            if text is not None:
                yield path.relative_to(folder).as_posix(), text


def _read_text(path: Path) -> str | None:
    # O_NOFOLLOW and a check on the descriptor: a command may have planted a link or a FIFO in
    # a staged copy (root ignores its read-only modes without a sandbox).
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > FILE_MAX_BYTES:
            return None
        data = handle.read(FILE_MAX_BYTES + 1)
    if b"\0" in data[:8192]:
        return None  # binary: the Read tool does not show it as text either
    # As the Read tool decodes it, so the index holds what a tool result would show.
    return data.decode("utf-8", "replace")
