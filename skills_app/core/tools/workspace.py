"""The conversation workspace: one directory the tools may touch, and staged read-only skills.

Layout of a workspace root (the Bash tool's cwd, and the base for relative tool paths):

    work/     scratch space (TMPDIR for Bash is work/.tmp)
    in/       files the user attached to a message (`save_input`)
    out/      artifacts: files here are offered to the user for download
    skills/   staged skill folders, read-only copies made by `stage_skill`
    runs/     one fresh folder per `skill_run` call ($RUN_DIR), made by `new_run_dir`

So "out/report.md", "work/data.csv" and "skills/pdf/SKILL.md" are all valid relative paths.
Absolute paths are accepted only when they lie inside the root. A staged skill holds two links
the server makes, `out -> ../../out` and `work -> ../../work`, so a script run from the skill's
folder writes `out/x` into the workspace's out/ (the skill-workspace layout of the toolset design).

Protection of staged skills, in every sandbox mode: the file tools refuse to write under skills/,
and staged files are read-only (0o444, dirs 0o555). With bubblewrap (SANDBOX=auto where it works,
or bwrap) skills/ is a read-only bind mount. Without it, modes alone would not stop root, so when
the server runs as root the staged copies and skills/ itself belong to another uid ("nobody")
and commands run with every capability dropped (see bash.py): to them root is an ordinary user
that cannot change, rename or remove what it does not own. A non-root server cannot give files
away; its commands own the staged copies and could make them writable again, so `stage_skill`
fingerprints every staged copy (mode, owner, inode, links included) and copies again whenever
it changed; every invocation and every `skill_run` stages first.

Planted links: a command can replace work/, out/ or any file with a symlink. Nothing here
follows one: the layout is repaired through directory descriptors (`ensure_layout` removes a
link where a folder belongs, and never chmods through it), artifact listing walks out/ without
following links, staging changes modes through O_NOFOLLOW descriptors, and files are opened
with an O_NOFOLLOW walk from the root (`open_file`, `open_workspace_file` for downloads).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, Protocol

from skills_app.core.tools.errors import ToolError
from skills_app.core.tools.safepath import (
    check_parts,
    ensure_dir,
    is_link_error,
    open_beneath,
    open_dir,
)
from skills_app.core.tools.staging import (
    STAGED_FILE_MODE,
    chown_tree,
    copy_tree,
    link_workspace_dirs,
    make_read_only,
    remove_tree,
    staged_owner,
    tree_fingerprint,
)

_DIR_MODE = 0o755
# Entries and folder levels of out/ looked at around a command: a command may leave a million
# files, or a folder thousands of levels deep, in out/. Past these, later files are not offered
# as downloads (they stay in the workspace); the listing stays fast on the event loop.
ARTIFACT_SCAN_LIMIT = 20_000
ARTIFACT_MAX_DEPTH = 40
_COPY_CHUNK = 1024 * 1024


class Readable(Protocol):
    """A file to copy from (an upload): `read(n)` gives at most n bytes, b"" at the end."""

    def read(self, size: int = ..., /) -> bytes: ...


_CONVERSATION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_UNSAFE_FOLDER_CHARS = re.compile(r"[^\w.-]")


class WorkspaceError(ToolError):
    """A path or staging request that would leave, or damage, the workspace."""


class WorkspaceFileError(WorkspaceError):
    """A file that cannot be served: `reason` is "missing", "link", "not-a-file" or "invalid"."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def _inside(path: Path, base: Path) -> bool:
    return path == base or path.is_relative_to(base)


def skill_folder_name(name: str) -> str:
    """The folder name a skill is staged under: "a:b" becomes "a__b", other odd characters "_"."""
    # Skill names never contain "_" (lowercase letters, digits, hyphens), so "__" cannot collide
    # with a plain name; plugin and nested names ("plugin:skill", "dir:skill") stay readable.
    folder = _UNSAFE_FOLDER_CHARS.sub("_", name.replace(":", "__"))
    if not folder or folder.startswith("."):
        raise WorkspaceError(
            f"Cannot stage a skill named {name!r}: the name must start with a letter or digit."
        )
    return folder


class Workspace:
    """One conversation's directory tree; every tool path goes through `resolve`."""

    root: Path
    work_dir: Path
    out_dir: Path
    skills_dir: Path

    def __init__(self, root: Path) -> None:
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True, mode=_DIR_MODE)
        # Resolved once so containment checks compare real paths with real paths.
        self.root = root.resolve()
        self.work_dir = self.root / "work"
        self.out_dir = self.root / "out"
        self.skills_dir = self.root / "skills"
        self.ensure_layout()

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    @classmethod
    def for_conversation(cls, base: Path, conversation_id: int | str) -> Workspace:
        """The workspace of one conversation: `base/<conversation_id>`."""
        ident = str(conversation_id)
        if not _CONVERSATION_ID.fullmatch(ident):
            raise WorkspaceError(
                f"Invalid conversation id {ident!r} for a workspace: use letters, digits, '-' or '_'."
            )
        return cls(Path(base) / ident)

    # --- layout -----------------------------------------------------------------------------

    def ensure_layout(self) -> None:
        """Make work/, out/, skills/ and in/ real folders again, removing links a command planted."""
        fd = open_dir(self.root)
        try:
            os.fchmod(fd, _DIR_MODE)
            for name in ("work", "out", "skills", "in"):
                ensure_dir(fd, name, _DIR_MODE)
            owner = staged_owner()
            if owner is not None:
                # A root command without a sandbox must not rename or replace staged skills.
                skills_fd = os.open(
                    "skills", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd
                )
                try:
                    os.fchown(skills_fd, *owner)
                finally:
                    os.close(skills_fd)
        finally:
            os.close(fd)

    def save_input(self, name: str, data: bytes | Readable) -> str:
        """Write an attached file as in/<name> (or in/<stem>-2.<ext>, ...); its relative path.

        `data` is the bytes, or a file read from where it stands and copied in chunks.

        `name` must already be a plain file name (`core.attachments.safe_name`). The file is
        created with O_EXCL through an O_NOFOLLOW walk, so a link a command planted in in/ is
        never written through and an earlier attachment is never overwritten.
        """
        return self._save_new("in", name, data)

    def save_output(self, name: str, data: bytes) -> str:
        """Write a file a tool received for the person (an MCP result's image) as out/<name>
        (or out/<stem>-2.<ext>, ...), as `save_input` does in in/; its relative path."""
        return self._save_new("out", name, data)

    def _save_new(self, folder: str, name: str, data: bytes | Readable) -> str:
        if not name or "/" in name or name in (".", "..") or name.startswith("."):
            raise WorkspaceError(f"{name!r} is not a plain file name for {folder}/.")
        self.ensure_layout()
        stem, dot, ext = name.rpartition(".")
        if not dot:
            stem, ext = name, ""
        for attempt in range(1, 1000):
            candidate = name if attempt == 1 else f"{stem}-{attempt}" + (f".{ext}" if ext else "")
            try:
                fd = open_beneath(
                    self.root, (folder, candidate), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644
                )
            except FileExistsError:
                continue  # a file, or a link a command put there: never replaced
            with os.fdopen(fd, "wb") as handle:
                if isinstance(data, bytes):
                    handle.write(data)
                else:
                    shutil.copyfileobj(data, handle, _COPY_CHUNK)
            return f"{folder}/{candidate}"
        raise WorkspaceError(f"Too many files named like {name} in {folder}/; rename the file.")

    def remove_input(self, relative: str, *, size: int, check: Callable[[BinaryIO], bool]) -> bool:
        """Remove an attached file if it is still the one attached; True when it was removed.

        The file must be a regular file of `size` bytes that `check` accepts (its digest). A
        command may swap in/ (or the file) for a link while that runs: everything goes through
        the descriptor of the real folder, and only the very file checked is unlinked, so
        nothing outside in/ is ever deleted.
        """
        parts = tuple(relative.split("/"))
        try:
            check_parts(parts)
            parent = open_dir(self.root, parts[:-1])
        except (ValueError, OSError):
            return False  # not a plain path, gone, or through a link: nothing of ours
        try:
            try:
                fd = os.open(
                    parts[-1],
                    os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                    dir_fd=parent,
                )
            except OSError:
                return False
            with os.fdopen(fd, "rb") as handle:
                checked = os.fstat(fd)
                if not stat.S_ISREG(checked.st_mode) or checked.st_size != size:
                    return False
                os.set_blocking(fd, True)
                if not check(handle):
                    return False
            try:
                now = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                return False
            if (now.st_dev, now.st_ino) != (checked.st_dev, checked.st_ino):
                return False  # replaced since the check: not the file attached
            os.unlink(parts[-1], dir_fd=parent)
            return True
        finally:
            os.close(parent)

    def new_run_dir(self) -> Path:
        """A fresh runs/<id>/ for one `skill_run` call (its $RUN_DIR), made without following links."""
        fd = open_dir(self.root)
        try:
            ensure_dir(fd, "runs", _DIR_MODE)
        finally:
            os.close(fd)
        name = f"run-{uuid.uuid4().hex[:12]}"
        fd = open_dir(self.root, ("runs",))
        try:
            os.mkdir(name, _DIR_MODE, dir_fd=fd)
        finally:
            os.close(fd)
        return self.root / "runs" / name

    def ensure_tmp(self) -> Path:
        """work/.tmp as a real folder (Bash's TMPDIR), without following links."""
        fd = open_dir(self.root, ("work",))
        try:
            ensure_dir(fd, ".tmp", _DIR_MODE)
        finally:
            os.close(fd)
        return self.work_dir / ".tmp"

    def open_file(
        self, path: Path, flags: int, mode: int = 0o644, *, make_dirs: bool = False
    ) -> int:
        """Open a resolved path inside the root with no link in any component (WorkspaceError)."""
        try:
            parts = path.relative_to(self.root).parts
            return open_beneath(self.root, parts, flags, mode, make_dirs=make_dirs)
        except ValueError as exc:
            raise WorkspaceError(f"{path} is not a file path inside the workspace.") from exc
        except OSError as exc:
            if is_link_error(exc):
                raise WorkspaceError(
                    f"{self.relative(path)} goes through a symbolic link that appeared after the "
                    "path was checked; it was not followed. Try again with the real path."
                ) from exc
            raise

    # --- paths ------------------------------------------------------------------------------

    def resolve(self, path: str, *, for_write: bool = False) -> Path:
        """The real absolute path for a tool path, refusing anything outside the workspace."""
        if not isinstance(path, str) or not path.strip():
            raise WorkspaceError(
                "A file path is required: give a path relative to the workspace root "
                "(e.g. work/notes.md or out/report.md)."
            )
        if "\x00" in path:
            raise WorkspaceError("File paths cannot contain NUL characters.")
        raw = Path(path)
        candidate = raw if raw.is_absolute() else self.root / raw
        lexical = Path(os.path.normpath(candidate))
        if not _inside(lexical, self.root):
            raise WorkspaceError(
                f"{path!r} is outside the workspace. Use a path inside the workspace root "
                f"{self.root} (relative paths such as work/x or out/x start there)."
            )
        try:
            real = candidate.resolve()
        except (OSError, RuntimeError) as exc:
            raise WorkspaceError(
                f"Cannot resolve {path!r}: {exc}. Check for a symlink loop."
            ) from exc
        if not _inside(real, self.root):
            raise WorkspaceError(
                f"{path!r} goes through a symbolic link that leads outside the workspace; "
                "only files inside the workspace can be used."
            )
        if for_write and _inside(real, self.skills_dir):
            raise WorkspaceError(
                f"{path!r} is inside skills/, where staged skill folders are read-only. "
                "Write to work/ or out/ instead."
            )
        return real

    def relative(self, path: Path) -> str:
        """`path` (inside the root) as a root-relative POSIX string; "." for the root itself."""
        return path.relative_to(self.root).as_posix() or "."

    def is_output(self, path: Path) -> bool:
        """True when a resolved path lies under out/."""
        return path != self.out_dir and _inside(path, self.out_dir)

    # --- artifacts --------------------------------------------------------------------------

    def snapshot_out(self) -> dict[str, tuple[int, int]]:
        """{relpath: (mtime_ns, size)} of the regular files under out/, to diff around a call."""
        snapshot: dict[str, tuple[int, int]] = {}
        seen = 0
        # fwalk without follow_symlinks yields nothing when out/ itself is a link and never
        # descends into a linked folder, checking each step on descriptors (no check-then-use).
        for dirpath, dirnames, filenames, dirfd in os.fwalk(self.out_dir, follow_symlinks=False):
            dirnames.sort()
            if len(Path(dirpath).relative_to(self.out_dir).parts) >= ARTIFACT_MAX_DEPTH:
                dirnames[:] = []
            seen += len(dirnames)
            # Sorted, so the files kept past the limit are the same before and after a call.
            for filename in sorted(filenames):
                seen += 1
                if seen > ARTIFACT_SCAN_LIMIT:
                    return snapshot
                try:
                    info = os.stat(filename, dir_fd=dirfd, follow_symlinks=False)
                except OSError:
                    continue  # removed while walking
                # Symlinks are never artifacts: a link to /etc/passwd must not become a download.
                if stat.S_ISREG(info.st_mode):
                    full = Path(dirpath) / filename
                    snapshot[self.relative(full)] = (info.st_mtime_ns, info.st_size)
        return snapshot

    def artifacts(self) -> list[str]:
        """Regular files under out/, relative to the root, sorted."""
        return sorted(self.snapshot_out())

    # --- staged skills ----------------------------------------------------------------------

    def stage_skill(self, name: str, source_dir: Path, digest: str) -> Path:
        """Copy a skill folder read-only into skills/<folder>/ unless that digest is already there."""
        source = Path(source_dir).resolve()
        if not source.is_dir():
            raise WorkspaceError(f"Cannot stage skill {name!r}: {source} is not a directory.")
        folder = skill_folder_name(name)
        self.ensure_layout()
        target = self.skills_dir / folder
        marker = self.skills_dir / f".{folder}.digest"
        if _is_real_dir(target) and self._marker_matches(marker, digest, target):
            return target

        staging = self.skills_dir / f".staging-{folder}-{uuid.uuid4().hex[:8]}"
        owner = staged_owner()
        try:
            copy_tree(source, staging)
            link_workspace_dirs(staging)
            make_read_only(staging)
            if owner is not None:
                chown_tree(staging, owner)
            if target.exists() or target.is_symlink():
                remove_tree(target)
            staging.rename(target)
        except OSError as exc:
            remove_tree(staging)
            raise WorkspaceError(f"Cannot stage skill {name!r} from {source}: {exc}") from exc
        record = json.dumps({"digest": digest, "tree": tree_fingerprint(target)})
        marker.unlink(missing_ok=True)  # a link planted there is removed, not written through
        fd = self.open_file(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, STAGED_FILE_MODE)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(record)
            if owner is not None:
                os.fchown(handle.fileno(), *owner)
        return target

    def _marker_matches(self, marker: Path, digest: str, target: Path) -> bool:
        try:
            with os.fdopen(self.open_file(marker, os.O_RDONLY), encoding="utf-8") as handle:
                recorded = json.loads(handle.read(1024 * 1024))
        except (OSError, ValueError):
            return False
        # The fingerprint catches a staged copy changed behind our back (root ignores 0o444).
        return (
            isinstance(recorded, dict)
            and recorded.get("digest") == digest
            and recorded.get("tree") == tree_fingerprint(target)
        )


def open_workspace_file(ws: Workspace, relative_path: str) -> BinaryIO:
    """Open a workspace file for download, refusing a symlink in any component of the path.

    `relative_path` is root-relative (e.g. "out/report.md"). Raises WorkspaceFileError whose
    `reason` is "invalid" (absolute, `..`, empty parts), "missing", "link" or "not-a-file".
    """
    parts = tuple(relative_path.split("/")) if isinstance(relative_path, str) else ()
    try:
        check_parts(parts)
    except ValueError as exc:
        raise WorkspaceFileError(
            f"{relative_path!r} is not a plain relative path inside the workspace ({exc}); "
            "use a path such as out/report.md.",
            "invalid",
        ) from exc
    try:
        fd = open_beneath(ws.root, parts, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError as exc:
        raise WorkspaceFileError(f"{relative_path} does not exist.", "missing") from exc
    except OSError as exc:
        if is_link_error(exc):
            raise WorkspaceFileError(
                f"{relative_path} is or goes through a symbolic link; links are never served.",
                "link",
            ) from exc
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise WorkspaceFileError(f"{relative_path} is not a regular file.", "not-a-file")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def _is_real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(path.lstat().st_mode)
    except OSError:
        return False
