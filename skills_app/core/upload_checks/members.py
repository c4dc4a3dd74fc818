"""Reading an upload's files safely: the zip central directory, capped reads, the path rules.

The rules are listed in the package docstring (`upload_checks/__init__.py`).
"""

from __future__ import annotations

import io
import os
import re
import stat
import struct
import unicodedata
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from ..skilltypes import Problem
from ..tree import SKIP_NAMES

ARCHIVE_SUFFIXES = (".zip", ".skill")
# Below this size a high ratio is ordinary (a file of blank lines); the total cap still applies.
RATIO_MIN_BYTES = 1024 * 1024
_MAX_NAME_BYTES = 255
_MAX_PATH_CHARS = 400
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_IGNORED_TOPS = frozenset({"__MACOSX"})
_ZIP_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    EOFError,
    OSError,
    ValueError,
    NotImplementedError,
    RuntimeError,
    struct.error,
    KeyError,
    IndexError,
    OverflowError,
)


class UploadError(Exception):
    """An upload that was refused; `.message` says why and what to do, `.problems` the lint report."""

    def __init__(self, message: str, problems: list[Problem] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.problems: list[Problem] = list(problems or [])


@dataclass(frozen=True, slots=True)
class Limits:
    max_total_bytes: int
    max_files: int
    max_file_bytes: int
    max_ratio: int


@dataclass(frozen=True, slots=True)
class Member:
    """One regular file of an upload, its path normalised, its bytes read under the caps."""

    path: str
    data: bytes
    executable: bool = False


def _mb(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MB" if n >= 1024 * 1024 else f"{n:,} bytes"


# --- paths ---------------------------------------------------------------------------------


def clean_path(raw: str) -> str:
    """The normalised relative path of an entry, or UploadError saying what is wrong with it."""
    bad = next((c for c in raw if unicodedata.category(c) == "Cc" or c in _BIDI), None)
    if bad is not None:
        raise UploadError(
            f"the entry name {raw!r} contains the control character U+{ord(bad):04X}; "
            "rename the file with printable characters only"
        )
    path = raw.replace("\\", "/")
    if path.startswith("/") or re.match(r"[A-Za-z]:", path):
        raise UploadError(
            f"the entry {raw!r} has an absolute path; archives must hold relative paths "
            "(re-create the zip from inside the folder)"
        )
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UploadError(
            f"the entry {raw!r} contains '..', which would write outside the skill folder; "
            "remove it from the archive"
        )
    if not parts:
        raise UploadError(f"an entry has an empty name ({raw!r}); remove it from the archive")
    if len(path) > _MAX_PATH_CHARS or any(len(p.encode()) > _MAX_NAME_BYTES for p in parts):
        raise UploadError(
            f"the entry {raw[:80]!r}... has a name longer than the file system allows; shorten it"
        )
    return "/".join(parts)


def _ignored(path: str) -> bool:
    parts = path.split("/")
    return parts[0] in _IGNORED_TOPS or any(p in SKIP_NAMES for p in parts)


def _check_duplicates(paths: list[tuple[str, bool]]) -> None:
    """Refuse two entries for one path (exact or by letter case), or a file used as a folder."""
    seen: dict[str, tuple[str, bool]] = {}
    for path, is_dir in paths:
        key = path.casefold()
        if key in seen:
            other, other_dir = seen[key]
            if is_dir and other_dir:
                continue  # zips may list a folder twice; it holds nothing itself
            if other == path:
                raise UploadError(
                    f"the path {path!r} appears twice in the upload; keep one copy and try again"
                )
            raise UploadError(
                f"{other!r} and {path!r} differ only in letter case; they would overwrite each "
                "other on many systems, so rename one"
            )
        seen[key] = (path, is_dir)
    for path, _is_dir in paths:
        parent = path.rsplit("/", 1)[0] if "/" in path else ""
        while parent:
            hit = seen.get(parent.casefold())
            if hit is not None and not hit[1]:
                raise UploadError(
                    f"{hit[0]!r} is a file, but {path!r} uses it as a folder; rename one of them"
                )
            parent = parent.rsplit("/", 1)[0] if "/" in parent else ""


def _check_count(n: int, limits: Limits) -> None:
    if n > limits.max_files:
        raise UploadError(
            f"the upload holds {n:,} files and folders; the limit is {limits.max_files:,}. "
            "Remove generated or vendored files and try again"
        )


def _check_file_size(path: str, size: int, limits: Limits) -> None:
    if size > limits.max_file_bytes:
        raise UploadError(
            f"{path} is {_mb(size)}; one file may be at most {_mb(limits.max_file_bytes)}. "
            "Leave large data out of the skill"
        )


def _check_total(total: int, limits: Limits) -> None:
    if total > limits.max_total_bytes:
        raise UploadError(
            f"the upload expands to more than {_mb(limits.max_total_bytes)} "
            f"({_mb(total)} so far); make the skill smaller"
        )


# --- readers -------------------------------------------------------------------------------


def read_zip(data: bytes, filename: str, limits: Limits) -> list[Member]:
    """Check a zip's central directory, then read its files with size caps."""
    if not filename.lower().endswith(ARCHIVE_SUFFIXES):
        raise UploadError(
            f"{filename!r} is not a .zip or .skill file; upload a zip of the skill folder"
        )
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        infos = archive.infolist()
    except _ZIP_ERRORS as exc:
        raise UploadError(
            f"{filename!r} is not a zip archive ({exc}); zip the skill folder and upload that"
        ) from None
    _check_count(len(infos), limits)
    entries: list[tuple[zipfile.ZipInfo, str, bool]] = []
    total = 0
    for info in infos:
        raw = info.filename
        is_dir = raw.endswith(("/", "\\"))
        path = clean_path(raw)
        mode = info.external_attr >> 16
        kind = stat.S_IFMT(mode)
        if kind == stat.S_IFLNK:
            raise UploadError(
                f"{path} is a symbolic link; uploads may hold regular files only, so replace the "
                "link with the file it points to"
            )
        if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
            raise UploadError(
                f"{path} is a device or special file, not a regular file; remove it from the archive"
            )
        is_dir = is_dir or kind == stat.S_IFDIR
        if info.flag_bits & 0x1:
            raise UploadError(f"{path} is encrypted; upload an archive without a password")
        if not is_dir:
            _check_file_size(path, info.file_size, limits)
            _check_ratio(path, info.file_size, info.compress_size, limits)
            total += info.file_size
        entries.append((info, path, is_dir))
    _check_duplicates([(p, d) for _, p, d in entries])
    _check_total(total, limits)
    if total >= RATIO_MIN_BYTES and total > limits.max_ratio * max(len(data), 1):
        raise UploadError(
            f"the archive expands {total / max(len(data), 1):.0f} times "
            f"(limit {limits.max_ratio}); this looks like a zip bomb, so it was refused"
        )
    members: list[Member] = []
    read_total = 0
    for info, path, is_dir in entries:
        if is_dir or _ignored(path):
            continue
        try:
            with archive.open(info) as fh:
                # The header's size is not trusted: read one byte past the cap to notice a lie.
                body = fh.read(limits.max_file_bytes + 1)
        except _ZIP_ERRORS as exc:
            raise UploadError(
                f"{path} cannot be read from the archive ({exc}); the zip is damaged, create it again"
            ) from None
        _check_file_size(path, len(body), limits)
        read_total += len(body)
        _check_total(read_total, limits)
        mode = info.external_attr >> 16
        members.append(Member(path, body, executable=bool(mode & 0o111)))
    return members


def _check_ratio(path: str, size: int, compressed: int, limits: Limits) -> None:
    if size >= RATIO_MIN_BYTES and size > limits.max_ratio * max(compressed, 1):
        raise UploadError(
            f"{path} expands {size / max(compressed, 1):.0f} times when unpacked "
            f"(limit {limits.max_ratio}); this looks like a zip bomb, so it was refused"
        )


def check_files(files: list[tuple[str, bytes]], limits: Limits) -> list[Member]:
    """Check a browser folder upload: (relative path, bytes) pairs."""
    _check_count(len(files), limits)
    paths: list[tuple[str, bool]] = []
    members: list[Member] = []
    total = 0
    for raw, data in files:
        path = clean_path(raw)
        _check_file_size(path, len(data), limits)
        total += len(data)
        _check_total(total, limits)
        paths.append((path, False))
        members.append(Member(path, data))
    _check_duplicates(paths)
    return [m for m in members if not _ignored(m.path)]


def read_directory(directory: Path, limits: Limits) -> list[Member]:
    """Read a folder from disk (CLI import); paths start with the folder's own name."""
    directory = Path(directory).absolute()
    if not directory.is_dir():
        raise UploadError(f"{directory} is not a folder; give the skill's folder")
    base = directory.parent
    found: list[tuple[str, Path, bool]] = []
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_NAMES)
        for name in sorted([*dirnames, *filenames]):
            full = Path(dirpath) / name
            rel = full.relative_to(base).as_posix()
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                raise UploadError(
                    f"{rel} is a symbolic link; uploads store regular files only, so copy the "
                    "target into the skill folder"
                )
            if name in dirnames:
                continue
            if not stat.S_ISREG(st.st_mode):
                raise UploadError(f"{rel} is a device or special file; remove it from the folder")
            found.append((rel, full, bool(st.st_mode & 0o111)))
            _check_count(len(found), limits)
    members: list[Member] = []
    total = 0
    for rel, full, executable in found:
        path = clean_path(rel)
        if _ignored(path):
            continue
        _check_file_size(path, full.stat().st_size, limits)
        with open(full, "rb") as fh:
            data = fh.read(limits.max_file_bytes + 1)
        _check_file_size(path, len(data), limits)
        total += len(data)
        _check_total(total, limits)
        members.append(Member(path, data, executable))
    return members
