"""File-system steps that never follow a symbolic link, for folders a command can change.

A command in a workspace can replace any entry with a symlink (`rm -r out; ln -s /srv/var out`).
Checking a path and then using it (`resolve`, then `open`) follows a link planted in between,
and `chmod`/`mkdir`/`open` on a path follow links in every component. These helpers work from a
directory file descriptor one component at a time with O_NOFOLLOW, so a link anywhere in the
path fails with ELOOP instead of leading out; callers turn that into a clear error.
"""

from __future__ import annotations

import errno
import os
import stat
import uuid
from collections.abc import Sequence
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def is_link_error(exc: OSError) -> bool:
    """True when an O_NOFOLLOW step failed because the component is a symlink."""
    # ELOOP: the last component is a link; ENOTDIR: a link (or file) where a folder should be.
    return exc.errno in (errno.ELOOP, errno.ENOTDIR)


def check_parts(parts: Sequence[str]) -> None:
    """Refuse empty, `.` and `..` components (ValueError): the walk only goes down."""
    if not parts:
        raise ValueError("an empty path")
    for part in parts:
        if part in ("", ".", "..") or "/" in part or "\x00" in part:
            raise ValueError(f"the path component {part!r}")


def open_dir(root: Path, parts: Sequence[str] = (), *, create: bool = False) -> int:
    """A descriptor of root/parts..., refusing any symlink below root; `create` makes folders."""
    fd = os.open(root, _DIR_FLAGS)
    try:
        for part in parts:
            if create:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
            child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_beneath(
    root: Path, parts: Sequence[str], flags: int, mode: int = 0o644, *, make_dirs: bool = False
) -> int:
    """Open root/parts... with O_NOFOLLOW on every component (OSError ELOOP on a link)."""
    check_parts(parts)
    parent = open_dir(root, parts[:-1], create=make_dirs)
    try:
        return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=parent)
    finally:
        os.close(parent)


def ensure_dir(parent_fd: int, name: str, mode: int = 0o755) -> None:
    """Make `name` under parent_fd a real folder with `mode`, never following or chmod-ing a link.

    A symlink there is removed (the link only; its target is untouched). Another non-folder
    (a file a command put there) is renamed aside to `<name>.not-a-folder-<id>` so nothing is lost.
    """
    try:
        info = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    except FileNotFoundError:
        info = None
    if info is not None and stat.S_ISLNK(info.st_mode):
        os.unlink(name, dir_fd=parent_fd)
        info = None
    elif info is not None and not stat.S_ISDIR(info.st_mode):
        aside = f"{name}.not-a-folder-{uuid.uuid4().hex[:8]}"
        os.rename(name, aside, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
        info = None
    if info is None:
        try:
            os.mkdir(name, mode, dir_fd=parent_fd)
        except FileExistsError:
            pass  # made concurrently; the O_NOFOLLOW open below checks what it is
    fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def chmod_nofollow(path: Path, mode: int) -> bool:
    """chmod a file or folder through a descriptor; a symlink (or a vanished entry) is skipped."""
    try:
        # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if is_link_error(exc) or exc.errno == errno.ENOENT:
            return False
        raise
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)
    return True
