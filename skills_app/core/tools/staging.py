"""Staged skill copies: copying without following links out, read-only modes, ownership, the
links into the workspace, and the fingerprint that tells whether a copy was changed.

Used by `Workspace.stage_skill`; see `workspace.py` for the protection these steps give in
each sandbox mode.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
from pathlib import Path

from skills_app.core.tools.safepath import chmod_nofollow

DIR_MODE = 0o755
STAGED_FILE_MODE = 0o444
STAGED_EXEC_MODE = 0o555
STAGED_DIR_MODE = 0o555
# Links from a staged skill to the workspace's own folders, made at staging time.
SKILL_LINKS = {"out": "../../out", "work": "../../work"}
_NOBODY = 65534


def staged_owner() -> tuple[int, int] | None:
    """The uid/gid staged skills belong to when the server runs as root, else None."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam("nobody")
    except KeyError:
        return (_NOBODY, _NOBODY)
    return (entry.pw_uid, entry.pw_gid)


def _inside(path: Path, base: Path) -> bool:
    return path == base or path.is_relative_to(base)


def copy_tree(source: Path, dest: Path) -> None:
    """Copy regular files and folders; symlinks only when they point to a file inside `source`."""
    dest.mkdir(mode=DIR_MODE)
    for dirpath, dirnames, filenames in os.walk(source):
        here = Path(dirpath)
        out = dest / here.relative_to(source)
        for dirname in sorted(dirnames):
            # os.walk lists symlinked dirs here but does not descend; skip them to avoid loops.
            if not (here / dirname).is_symlink():
                (out / dirname).mkdir(mode=DIR_MODE)
        for filename in sorted(filenames):
            src = here / filename
            if src.is_symlink():
                real = src.resolve()
                if not (_inside(real, source) and real.is_file()):
                    continue  # a link out of the skill folder is never followed
                shutil.copyfile(real, out / filename)
                shutil.copymode(real, out / filename)
            elif src.is_file():
                shutil.copyfile(src, out / filename)
                shutil.copymode(src, out / filename)
            # sockets, fifos and devices are not skill content


def link_workspace_dirs(staged: Path) -> None:
    """`out` and `work` in a staged skill lead to the workspace's folders (relative links).

    A skill that has its own `out` or `work` entry keeps it. These links are the server's own:
    they sit in the read-only copy, which no command can change, and the server never follows
    a path through them (its walks skip links and `open_file` refuses any).
    """
    for name, target in SKILL_LINKS.items():
        if not os.path.lexists(staged / name):
            os.symlink(target, staged / name)


def chown_tree(root: Path, owner: tuple[int, int]) -> None:
    # lchown: the links themselves, never what they point to.
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        os.lchown(here, *owner)
        for entry in [*filenames, *(d for d in dirnames if (here / d).is_symlink())]:
            os.lchown(here / entry, *owner)


def make_read_only(root: Path) -> None:
    # Bottom-up so a directory becomes read-only only after its contents are done.
    # Through O_NOFOLLOW descriptors: a link planted in the staging folder is never chmod-ed.
    for dirpath, _dirnames, filenames in os.walk(root, topdown=False):
        for filename in filenames:
            path = Path(dirpath) / filename
            info = path.lstat()
            if stat.S_ISREG(info.st_mode):
                executable = info.st_mode & stat.S_IXUSR
                chmod_nofollow(path, STAGED_EXEC_MODE if executable else STAGED_FILE_MODE)
        chmod_nofollow(Path(dirpath), STAGED_DIR_MODE)


def remove_tree(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
        return
    if not path.exists():
        return
    # Read-only directories must become writable again before their entries can be removed.
    for dirpath, _dirnames, _filenames in os.walk(path):
        chmod_nofollow(Path(dirpath), DIR_MODE)
    shutil.rmtree(path)  # fd-based on Linux: it never follows a link out of the tree


def tree_fingerprint(root: Path) -> dict[str, list[int | str]]:
    """Every entry of a staged copy with what a change would touch (links by their target)."""
    tree: dict[str, list[int | str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        for name in [".", *filenames, *(d for d in dirnames if (here / d).is_symlink())]:
            path = here / name if name != "." else here
            info = path.lstat()
            entry: list[int | str] = [info.st_mtime_ns, info.st_size, info.st_mode]
            entry += [info.st_uid, info.st_ino]
            if stat.S_ISLNK(info.st_mode):
                entry.append(os.readlink(path))
            tree[path.relative_to(root).as_posix()] = entry
    return tree
