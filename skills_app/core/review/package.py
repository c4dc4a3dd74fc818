"""The files of one skill version as a reviewer sees them: text shown, binaries listed.

Bounded: at most MAX_FILES files are read and a text over MAX_TEXT_BYTES is listed like a
binary (size and digest, not shown), so a hostile upload cannot make the review page huge.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from ..tree import read_file, walk_skill_tree

MAX_FILES = 500
MAX_TEXT_BYTES = 512 * 1024
# Documents a body may point the model at, whose commands belong in the manifest.
DOC_SUFFIXES = frozenset({".md", ".markdown", ".txt", ".rst"})


@dataclass(frozen=True, slots=True)
class PackageFile:
    """One file of a skill version: its path, size, sha256, and text when it is text."""

    rel: str
    size: int
    sha256: str
    text: str | None  # None: binary, not UTF-8, or too large to show
    executable: bool = False

    @property
    def is_text(self) -> bool:
        """True when the file is shown as text."""
        return self.text is not None

    @property
    def is_script(self) -> bool:
        """A file the model may run: under scripts/, executable, or a script suffix."""
        suffix = Path(self.rel).suffix.lower()
        return (
            self.rel.startswith("scripts/")
            or self.executable
            or suffix in {".py", ".sh", ".bash", ".js", ".mjs", ".rb", ".pl"}
        )


def _text_of(rel: str, data: bytes) -> str | None:
    if len(data) > MAX_TEXT_BYTES or b"\0" in data[:8192]:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    # Any suffix that decodes as UTF-8 is shown: a reviewer reads everything the model can.
    return text.replace("\r\n", "\n")


def read_package(directory: Path) -> list[PackageFile]:
    """Every file of the skill folder, sorted by path (at most MAX_FILES)."""
    out: list[PackageFile] = []
    for entry in sorted(walk_skill_tree(Path(directory)), key=lambda e: e.rel):
        if entry.is_dir:
            continue
        if len(out) >= MAX_FILES:
            break
        data = read_file(entry.path)
        executable = bool(Path(entry.path).stat().st_mode & 0o111)
        out.append(
            PackageFile(
                rel=entry.rel,
                size=len(data),
                sha256=hashlib.sha256(data).hexdigest(),
                text=_text_of(entry.rel, data),
                executable=executable,
            )
        )
    return out


__all__ = ["DOC_SUFFIXES", "MAX_FILES", "MAX_TEXT_BYTES", "PackageFile", "read_package"]
