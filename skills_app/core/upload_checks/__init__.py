"""Reading an upload safely: zip central-directory checks, capped reads, path rules, skill layout.

Nothing here touches the database or the storage folder; `uploads` stages and installs what
these functions return. Every refusal is an UploadError whose message says what is wrong and
what to do, so the person uploading can fix it.

Rules (each has its own message):
- a path must be relative, without `..`, control or bidi-override characters, and at most
  MAX_TREE_DEPTH folders deep inside its skill (deeper files would be ignored by the registry);
- no symlinks, devices, FIFOs or sockets (zip mode bits), no encrypted members;
- limits: entries, bytes of one file, total bytes, compression ratio per file and overall;
  sizes are checked on the central directory first, then again while reading (never trusted);
- two entries may not name the same path, also not when they differ only in letter case
  (they would overwrite each other on macOS/Windows and read ambiguously everywhere);
- `__MACOSX/` and the names the registry skips (`.git`, `node_modules`, `__pycache__`,
  `.DS_Store`) are dropped after the checks.
"""

from __future__ import annotations

from .layout import Candidate, Layout, archive_stem, find_skills
from .members import (
    ARCHIVE_SUFFIXES,
    Limits,
    Member,
    UploadError,
    check_files,
    clean_path,
    read_directory,
    read_zip,
)

__all__ = [
    "ARCHIVE_SUFFIXES",
    "Candidate",
    "Layout",
    "Limits",
    "Member",
    "UploadError",
    "archive_stem",
    "check_files",
    "clean_path",
    "find_skills",
    "read_directory",
    "read_zip",
]
