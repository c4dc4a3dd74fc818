"""Listing a fetched commit's tree, and reading a skill's folder from the object store, refusing
what a skill cannot be.

Mode bits come from the tree entries: 0o120000 is a symbolic link, 0o160000 a submodule (a
commit of another repository), 0o040000 a folder; 0o100755 an executable file.
"""

from __future__ import annotations

import os
import stat
import unicodedata
import zlib
from dataclasses import dataclass

from dulwich.objects import Blob, Commit, ObjectID, Tree, hex_to_filename, valid_hexsha
from dulwich.repo import Repo

from .errors import GitSourceError

S_IFGITLINK = 0o160000
MAX_DEPTH = 12  # folders below the source's path (a plugin's skills sit 2-3 deep, plus the skill's)


@dataclass(frozen=True, slots=True)
class TreeLimits:
    max_files: int
    max_file_bytes: int
    max_total_bytes: int


@dataclass(frozen=True, slots=True)
class GitEntry:
    """One entry of the listed tree: its path (relative to the source's path), mode and object."""

    path: str
    mode: int
    sha: bytes

    @property
    def is_file(self) -> bool:
        return stat.S_ISREG(self.mode) or stat.S_ISLNK(self.mode) or self.mode == S_IFGITLINK


@dataclass(frozen=True, slots=True)
class GitFile:
    path: str  # relative to the skill's folder, "/"-separated
    data: bytes
    executable: bool


def _name(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise GitSourceError(f"{where}: a name in the tree is not UTF-8; rename it") from None


def _check_name(text: str, where: str) -> None:
    lowered = text.lower().rstrip(". ")
    if (
        text in ("", ".", "..")
        or "/" in text
        or "\\" in text
        or any(unicodedata.category(c) == "Cc" for c in text)
    ):
        raise GitSourceError(f"{where}: the tree holds the name {text!r}, which no file may have")
    if lowered == ".git" or lowered.startswith("git~") or lowered == ".gitmodules":
        raise GitSourceError(
            f"{where}{text}: names that Git itself uses ({text!r}) are refused in a skill source; "
            "remove it from the skill's folder"
        )


def list_tree(
    repo: Repo, commit: str, subpath: str, *, max_entries: int = 100_000
) -> list[GitEntry]:
    """Every file entry under `subpath` at `commit` (links and submodules too), nothing read.

    Only the skills' folders are checked and read (`read_folder`): a link or a `.git` folder
    elsewhere in the repository is none of a skill's business.
    """
    obj = repo.object_store[ObjectID(commit.encode())]
    if not isinstance(obj, Commit):
        raise GitSourceError(f"{commit} is not a commit")
    tree = repo.object_store[obj.tree]
    assert isinstance(tree, Tree)
    for part in [p for p in subpath.split("/") if p]:
        entry = next((e for e in tree.items() if e.path == part.encode()), None)
        if entry is None or entry.mode is None or not stat.S_ISDIR(entry.mode):
            raise GitSourceError(
                f"the commit {commit[:12]} has no folder {subpath!r}; check the source's path"
            )
        nxt = repo.object_store[entry.sha]
        assert isinstance(nxt, Tree)
        tree = nxt
    entries: list[GitEntry] = []

    def walk(node: Tree, prefix: str, depth: int) -> None:
        for item in node.items():
            assert item.path is not None and item.mode is not None and item.sha is not None
            rel = f"{prefix}{_name(item.path, prefix)}"
            if stat.S_ISDIR(item.mode):
                if depth < MAX_DEPTH:
                    child = repo.object_store[item.sha]
                    assert isinstance(child, Tree)
                    walk(child, f"{rel}/", depth + 1)
                continue
            entries.append(GitEntry(rel, item.mode, item.sha))
            if len(entries) > max_entries:
                raise GitSourceError(
                    f"the source's folder lists more than {max_entries:,} files; point the "
                    "source at a smaller folder"
                )

    walk(tree, "", 0)
    return entries


def read_blob(repo: Repo, entry: GitEntry, max_bytes: int) -> bytes:
    """The content of one regular file (a manifest), refused past `max_bytes`."""
    if not stat.S_ISREG(entry.mode):
        raise GitSourceError(f"{entry.path} is not a regular file")
    _type, size = _header(repo, entry.sha)
    if size > max_bytes:
        raise GitSourceError(f"{entry.path} is larger than {max_bytes // 1024} KB")
    blob = repo.object_store[ObjectID(entry.sha)]
    if not isinstance(blob, Blob):
        raise GitSourceError(f"{entry.path} is not a file in the object store")
    return blob.as_raw_string()


def read_folder(
    repo: Repo, entries: tuple[GitEntry, ...], limits: TreeLimits, origin: str = ""
) -> list[GitFile]:
    """One skill's files (entry paths relative to its folder), checked; GitSourceError if not."""
    files: list[GitFile] = []
    total = 0
    for entry in entries:
        where = f"{origin}{entry.path}"
        *folders, _last = entry.path.split("/")
        for part in entry.path.split("/"):
            _check_name(part, origin)
        if len(folders) > MAX_DEPTH:
            raise GitSourceError(f"{where} is too deep inside the skill; move it up")
        if entry.mode == S_IFGITLINK:
            raise GitSourceError(
                f"{where} is a submodule (another repository); submodules are not fetched, so "
                "copy what the skill needs into its folder"
            )
        if stat.S_ISLNK(entry.mode):
            raise GitSourceError(
                f"{where} is a symbolic link; a link can point outside the repository, so skill "
                "sources hold regular files only: copy the target in instead"
            )
        if not stat.S_ISREG(entry.mode):
            raise GitSourceError(f"{where} has the unknown file mode {entry.mode:o}")
        if len(files) + 1 > limits.max_files:
            raise GitSourceError(
                f"the skill at {origin or 'the source'} holds more than {limits.max_files} files; "
                "keep skills small"
            )
        type_num, size = _header(repo, entry.sha)
        if size > limits.max_file_bytes:
            raise GitSourceError(
                f"{where} is {size:,} bytes, over the limit of {limits.max_file_bytes:,} for "
                "one file; keep large files out of skills"
            )
        total += size
        if total > limits.max_total_bytes:
            raise GitSourceError(
                f"the skill at {origin or 'the source'} holds more than "
                f"{limits.max_total_bytes:,} bytes; keep large files out of skills"
            )
        blob = repo.object_store[ObjectID(entry.sha)]
        if type_num != Blob.type_num or not isinstance(blob, Blob):
            raise GitSourceError(f"{where} is not a file in the object store")
        files.append(GitFile(entry.path, blob.as_raw_string(), bool(entry.mode & 0o111)))
    return files


def _header(repo: Repo, sha: bytes) -> tuple[int, int]:
    """(type, size) of an object, read from its header before its content is inflated.

    A small pack can hold a blob that inflates to gigabytes; reading the declared size first
    refuses it without building it. Loose objects start with "<type> <size>\\0" inside their
    zlib stream; packed ones with a type-and-size varint (a delta's result size is the second
    varint at the start of its delta data).
    """
    for pack in getattr(repo.object_store, "packs", ()):
        try:
            offset = pack.index.object_offset(sha)
        except KeyError:
            continue
        with open(pack.data.path, "rb") as f:
            f.seek(offset)
            head = f.read(64)
            type_num, size, used = _pack_header(head)
            if type_num in (6, 7):  # a delta: its result size is in the delta data
                f.seek(offset + used)
                if type_num == 6:
                    while f.read(1)[0] & 0x80:  # the base's negative offset, a varint
                        pass
                else:
                    f.read(20)  # the base's id
                inflater = zlib.decompressobj()
                start = inflater.decompress(f.read(4096), 32)
                _base_size, at = _varint(start, 0)
                size, _ = _varint(start, at)
                return Blob.type_num, size
            return type_num, size
    # A loose object's file, where git's on-disk format puts it (objects/ab/cdef…); the id is
    # checked first so that no id can name a file outside the objects folder.
    if not valid_hexsha(sha):
        raise GitSourceError(f"{sha!r} is not an object id")
    path = hex_to_filename(os.fspath(repo.object_store.path), ObjectID(sha))
    with open(path, "rb") as f:
        inflater = zlib.decompressobj()
        start = inflater.decompress(f.read(4096), 64)
    kind, _, rest = start.partition(b" ")
    size = int(rest.split(b"\x00", 1)[0])
    return (Blob.type_num if kind == b"blob" else -1), size


def _pack_header(head: bytes) -> tuple[int, int, int]:
    byte = head[0]
    type_num = (byte >> 4) & 7
    size = byte & 0x0F
    shift, used = 4, 1
    while byte & 0x80:
        byte = head[used]
        size |= (byte & 0x7F) << shift
        shift += 7
        used += 1
    return type_num, size, used


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at
