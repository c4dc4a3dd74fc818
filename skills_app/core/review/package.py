"""The files of one skill version as a reviewer sees them: text shown, binaries listed.

Every file is read and every text is kept whole, whatever its size: the review page shows them
in pages (`pages.py`), so no page is huge and no file is left out. How much a package may hold
is bounded where it comes in (the upload limits) and where it is reviewed (`pages.MAX_PAGES`).

`shown_to_reviewer` says which files a reviewer could read as text; `unseen` which of the paths
a command names were not among them. A consent covers no command that names such a path.
"""

from __future__ import annotations

import fnmatch
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..tree import read_file, walk_skill_tree

# Documents a body may point the model at, whose commands belong in the manifest.
DOC_SUFFIXES = frozenset({".md", ".markdown", ".txt", ".rst"})
# What the review page showed before it paged the package: the first 500 files by path, and a
# text only up to 512 KB (longer ones were listed like binaries). Approvals made then were not
# shown the rest, so their consent covers no command that names it.
LEGACY_SHOWN_FILES = 500
LEGACY_SHOWN_TEXT_BYTES = 512 * 1024
_GLOB = frozenset("*?[")


@dataclass(frozen=True, slots=True)
class PackageFile:
    """One file of a skill version: its path, size, sha256, and text when it is text."""

    rel: str
    size: int
    sha256: str
    text: str | None  # None: binary (a NUL byte near the start) or not UTF-8
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


def _text_of(data: bytes) -> str | None:
    if b"\0" in data[:8192]:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    # Any suffix that decodes as UTF-8 is shown: a reviewer reads everything the model can.
    return text.replace("\r\n", "\n")


def read_package(directory: Path) -> list[PackageFile]:
    """Every file of the skill folder, sorted by path."""
    out: list[PackageFile] = []
    for entry in sorted(walk_skill_tree(Path(directory)), key=lambda e: e.rel):
        if entry.is_dir:
            continue
        data = read_file(entry.path)
        executable = bool(Path(entry.path).stat().st_mode & 0o111)
        out.append(
            PackageFile(
                rel=entry.rel,
                size=len(data),
                sha256=hashlib.sha256(data).hexdigest(),
                text=_text_of(data),
                executable=executable,
            )
        )
    return out


def shown_to_reviewer(files: Sequence[PackageFile], *, whole: bool = True) -> dict[str, bool]:
    """Each file's path, and whether its reviewer could read it as text.

    `whole=False`: as the review page showed it before it was paged (LEGACY_SHOWN_FILES,
    LEGACY_SHOWN_TEXT_BYTES), for approvals made then.
    """
    out: dict[str, bool] = {}
    for index, f in enumerate(sorted(files, key=lambda f: f.rel)):
        within = whole or (index < LEGACY_SHOWN_FILES and f.size <= LEGACY_SHOWN_TEXT_BYTES)
        out[f.rel] = f.is_text and within
    return out


def unseen(paths: Iterable[str], shown: Mapping[str, bool]) -> list[str]:
    """The paths (relative to the skill folder) whose content the reviewer was not shown as text.

    A path is seen when it is a file shown as text, or a folder or a pattern that takes in at
    least one file and only files shown as text. Anything else is unseen: a binary, a file left
    out of the review, a path outside the skill (`../x`), or one the package does not have (in
    a staged skill `out/` and `work/` lead into the workspace, which anyone's model may write).
    """
    out: list[str] = []
    for path in paths:
        if path in shown:
            seen = shown[path]
        else:
            if _GLOB & set(path):
                taken = [shown[rel] for rel in shown if fnmatch.fnmatchcase(rel, path)]
            else:
                prefix = path.rstrip("/") + "/"
                taken = [shown[rel] for rel in shown if rel.startswith(prefix)]
            seen = bool(taken) and all(taken)
        if not seen and path not in out:
            out.append(path)
    return out


__all__ = [
    "DOC_SUFFIXES",
    "LEGACY_SHOWN_FILES",
    "LEGACY_SHOWN_TEXT_BYTES",
    "PackageFile",
    "read_package",
    "shown_to_reviewer",
    "unseen",
]
