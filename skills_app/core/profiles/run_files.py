"""Files in and out of a `skill_run` call: declared inputs, output globs, saved artifacts.

Everything here works on the conversation's workspace, where a command may have planted
symbolic links. So nothing follows one: inputs are read and written through `Workspace.open_file`
(an O_NOFOLLOW walk from the root), outputs are found by walking the tree without following
links, and only regular files are ever read, copied or reported.

Inputs (`{"src": ..., "dst": ..., "mode": ...}`) come from:
- `workspace://path` (or a plain relative path): a file of the workspace, outside skills/;
- `artifact://name`: a file the user was offered for download, `out/<name>`;
- `skill://name/path`: a file of a skill offered in this conversation (its installed folder),
  which the rules let this conversation use: `skill_run` decides `Skill(name)` for each one first
  (`skill_names`), so a deny rule on a skill denies its files and an ask rule asks.
`host://` is refused: the server's own files are never reachable from a conversation. The
destination is workspace-relative (default `work/inputs/<file name>`) and must lie under work/
or out/. Inputs are always copied, never linked (`mode: "link"` is accepted and copies too).
"""

from __future__ import annotations

import fnmatch
import mimetypes
import os
import re
import stat
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from ..agent import SkillProvider
from ..tools.base import ToolError
from ..tools.storage import human
from ..tools.walk import Budget
from ..tools.workspace import Workspace, WorkspaceError

MAX_INPUTS = 20
MAX_INPUT_BYTES = 20 * 1024 * 1024
MAX_OUTPUT_FILES = 50
MAX_OUTPUT_GLOBS = 20
# Entries looked at when matching output globs: a command may leave millions of files behind.
# The walk also stops at the search limits of time and depth, and when the call is cancelled.
MAX_WALKED = 20_000
INLINE_CHARS = 16_000
INLINE_TOTAL = 64_000
# Where collected files and inputs may live; skills/ is staged skill content, runs/ run records.
_WRITABLE_TOPS = ("work", "out")
_SKIPPED_TOPS = ("skills",)
_VAR = re.compile(r"\$(?:\{(?P<braced>[A-Z_][A-Z0-9_]*)\}|(?P<plain>[A-Z_][A-Z0-9_]*))")


def expand(text: str, variables: Mapping[str, str]) -> str:
    """`$NAME` and `${NAME}` of the known run variables replaced; others left as written."""

    def value(m: re.Match[str]) -> str:
        name = m["braced"] or m["plain"]
        return variables.get(name, m[0])

    return _VAR.sub(value, text)


# -- inputs ---------------------------------------------------------------------------------


def stage_inputs(
    ws: Workspace, raw: object, skills: SkillProvider, *, limit: int | None = None
) -> list[str]:
    """Copy the declared inputs into the workspace; their workspace-relative destinations.

    `limit`: the bytes the copies may take in all (the person's storage allowance for the
    call); an input past it is refused before it is written.
    """
    if raw in (None, []):
        return []
    if not isinstance(raw, list) or len(raw) > MAX_INPUTS:
        raise ToolError(
            f"skill_run: inputs must be a list of at most {MAX_INPUTS} objects "
            '{"src": "workspace://work/data.csv", "dst": "work/inputs/data.csv"}.'
        )
    for item in raw:
        if not isinstance(item, Mapping) or not isinstance(item.get("src"), str):
            raise ToolError(
                'skill_run: each input needs a "src" string, e.g. "artifact://report.csv".'
            )
    if limit is not None:
        # All or nothing: the inputs' sizes first (read once more, one at a time), so an input
        # that does not fit leaves no partial copies behind.
        needed = sum(len(_read_source(ws, str(item["src"]), skills)[0]) for item in raw)
        if needed > limit:
            raise ToolError("skill_run: " + _no_room("the inputs", limit, needed))
    staged: list[str] = []
    for item in raw:
        data, filename = _read_source(ws, str(item["src"]), skills)
        dst = item.get("dst") or f"work/inputs/{filename}"
        if not isinstance(dst, str):
            raise ToolError(
                "skill_run: an input's dst must be a workspace path such as work/inputs/x."
            )
        target = _destination(ws, dst)
        fd = ws.open_file(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, make_dirs=True)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        staged.append(ws.relative(target))
    return staged


def _no_room(what: str, limit: int, needed: int) -> str:
    return (
        f"{what} do not fit in your storage: they take {human(needed)} and only "
        f"{human(limit)} may be written now; nothing was copied. Copy fewer or smaller files, "
        "or free space by removing files you no longer need from work/ or out/."
    )


def skill_names(raw: object) -> list[str]:
    """The skills named by the `skill://` inputs of a call, in order, once each."""
    names: list[str] = []
    for item in raw if isinstance(raw, list) else []:
        src = item.get("src") if isinstance(item, Mapping) else None
        if isinstance(src, str) and src.startswith("skill://"):
            name = src.removeprefix("skill://").partition("/")[0]
            if name and name not in names:
                names.append(name)
    return names


def _read_source(ws: Workspace, src: str, skills: SkillProvider) -> tuple[bytes, str]:
    scheme, sep, rest = src.partition("://")
    if not sep:
        scheme, rest = "workspace", src
    if scheme == "host":
        raise ToolError(
            "skill_run: host:// inputs are not available here (the server's files are never "
            "reachable from a conversation); use workspace://, artifact:// or skill://."
        )
    if scheme in ("workspace", "artifact"):
        # artifact://name@version: a download has one version here, the current file.
        relative = f"out/{rest.split('@', 1)[0]}" if scheme == "artifact" else rest
        path = ws.resolve(relative)
        if ws.relative(path).split("/", 1)[0] in _SKIPPED_TOPS:
            raise ToolError(f"skill_run: {src} is a staged skill file; use skill://NAME/PATH.")
        return _read_workspace_file(ws, path, src), path.name
    if scheme == "skill":
        return _read_skill_file(rest, src, skills)
    raise ToolError(
        f"skill_run: unknown input scheme {scheme!r} in {src}; use workspace://, artifact:// or "
        "skill://."
    )


def _read_workspace_file(ws: Workspace, path: Path, src: str) -> bytes:
    try:
        fd = ws.open_file(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise ToolError(f"skill_run: the input {src} does not exist.") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise ToolError(f"skill_run: the input {src} is not a regular file.")
        return _capped(handle.read(MAX_INPUT_BYTES + 1), src)


def _read_skill_file(rest: str, src: str, skills: SkillProvider) -> tuple[bytes, str]:
    # Skill names never contain "/", plugin names carry a ":" ("plugin:skill/path").
    name, _sep, relative = rest.partition("/")
    spec = skills.get(name)
    if spec is None or not relative:
        raise ToolError(f"skill_run: {src} does not name a file of a skill offered here.")
    root = spec.path.resolve()
    path = (root / relative).resolve()
    if not path.is_relative_to(root) or not path.is_file():
        raise ToolError(f"skill_run: {src} is not a file of the skill {name!r}.")
    with path.open("rb") as handle:
        return _capped(handle.read(MAX_INPUT_BYTES + 1), src), path.name


def _capped(data: bytes, src: str) -> bytes:
    if len(data) > MAX_INPUT_BYTES:
        raise ToolError(f"skill_run: the input {src} is larger than {MAX_INPUT_BYTES} bytes.")
    return data


def _destination(ws: Workspace, dst: str) -> Path:
    target = ws.resolve(dst, for_write=True)
    top = ws.relative(target).split("/", 1)[0]
    if top not in _WRITABLE_TOPS or target in (ws.work_dir, ws.out_dir):
        raise ToolError(f"skill_run: an input goes under work/ or out/, not to {dst!r}.")
    return target


# -- outputs --------------------------------------------------------------------------------


def normalise_pattern(pattern: str, ws: Workspace, variables: Mapping[str, str]) -> str | None:
    """A workspace-relative glob for an `output_files` entry, or None when it points outside."""
    text = expand(pattern.strip(), variables)
    if not text:
        return None
    if text.startswith("/"):
        root = ws.root.as_posix().rstrip("/") + "/"
        if not text.startswith(root):
            return None
        text = text[len(root) :]
    parts = [p for p in PurePosixPath(text).parts if p != "."]
    if ".." in parts:
        return None
    # skills/<name>/out/... and .../work/... are the links to the workspace's own folders.
    if len(parts) > 2 and parts[0] == "skills" and parts[2] in _WRITABLE_TOPS:
        parts = parts[2:]
    return "/".join(parts) or None


def output_matcher(pattern: str) -> Callable[[str], bool]:
    """A test of workspace-relative paths against one output glob, linear in their length.

    Segment by segment, `**` spanning any number of whole segments, any other segment an
    fnmatch pattern for one segment. The set of pattern positions still possible is carried
    along the path (an NFA run): `**/**/**/zz` costs segments times pattern parts, where the
    recursive matcher it replaces tried every way to share the path among the `**`s.
    """
    parts = tuple(pattern.split("/"))
    end = len(parts)

    def closure(states: set[int]) -> set[int]:
        # A `**` may match no segment at all: reaching it also reaches what follows it.
        out = set(states)
        for i in sorted(states):
            while i < end and parts[i] == "**":
                i += 1
                out.add(i)
        return out

    start = closure({0})

    def matches(path: str) -> bool:
        states = start
        for segment in path.split("/"):
            following: set[int] = set()
            for i in states:
                if i == end:
                    continue
                if parts[i] == "**":
                    following.add(i)
                elif fnmatch.fnmatchcase(segment, parts[i]):
                    following.add(i + 1)
            if not following:
                return False
            states = closure(following)
        return end in states

    return matches


def workspace_files(
    ws: Workspace,
    limit: int | None = None,
    *,
    budget: Budget | None = None,
    keep: Callable[[str], bool] | None = None,
) -> list[str]:
    """Regular files of the workspace, outside skills/ and hidden folders, never via a link,
    that `keep` accepts, until the budget (by default MAX_WALKED entries) is spent."""
    budget = budget or Budget(entries=MAX_WALKED if limit is None else limit)
    found: list[str] = []
    for dirpath, dirnames, filenames, dirfd in os.fwalk(ws.root, follow_symlinks=False):
        if budget.spent():
            break
        relative = Path(dirpath).relative_to(ws.root).as_posix()
        if relative == ".":
            dirnames[:] = [d for d in dirnames if d not in _SKIPPED_TOPS]
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        depth = 0 if relative == "." else relative.count("/") + 1
        if dirnames and depth >= budget.max_depth:
            budget.too_deep = True
            dirnames[:] = []
        budget.entries += len(dirnames)
        for filename in sorted(filenames):
            budget.entries += 1
            if budget.spent():
                break
            if filename.startswith("."):
                continue
            try:
                info = os.stat(filename, dir_fd=dirfd, follow_symlinks=False)
            except OSError:
                continue
            rel = filename if relative == "." else f"{relative}/{filename}"
            if stat.S_ISREG(info.st_mode) and (keep is None or keep(rel)):
                found.append(rel)
    return found


def collect_outputs(
    ws: Workspace, patterns: object, variables: Mapping[str, str], *, budget: Budget | None = None
) -> tuple[list[dict[str, Any]], str]:
    """The files matching `output_files` (name, MIME type, size and, for text files, the
    content), and a note when the walk stopped early (a limit, or the call was cancelled)."""
    if not isinstance(patterns, list) or not patterns:
        return [], ""
    strings = [p for p in patterns if isinstance(p, str)][:MAX_OUTPUT_GLOBS]
    globs = [normalise_pattern(p, ws, variables) for p in strings]
    matchers = [output_matcher(g) for g in globs if g]
    budget = budget or Budget(entries=MAX_WALKED)
    matched = workspace_files(ws, budget=budget, keep=lambda rel: any(m(rel) for m in matchers))
    files: list[dict[str, Any]] = []
    inline = INLINE_TOTAL
    for rel in matched[:MAX_OUTPUT_FILES]:
        entry, used = _describe(ws, rel, inline)
        if entry is not None:
            files.append(entry)
            inline -= used
    return files, budget.note("the search for output files")


def _describe(ws: Workspace, rel: str, budget: int) -> tuple[dict[str, Any] | None, int]:
    try:
        fd = ws.open_file(ws.root / rel, os.O_RDONLY | os.O_NONBLOCK)
    except (OSError, WorkspaceError):
        return None, 0  # removed or replaced by a link since the walk
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            return None, 0
        head = handle.read(min(INLINE_CHARS, max(budget, 0)) * 4 + 4)
    mime = mimetypes.guess_type(rel)[0] or "application/octet-stream"
    entry: dict[str, Any] = {"name": rel, "mime_type": mime, "size": info.st_size}
    text = _text_of(head)
    if text is None:
        return entry, 0  # not text: described, never inlined
    limit = min(INLINE_CHARS, max(budget, 0))
    if limit <= 0:
        entry["truncated"] = True
        return entry, 0
    entry["content"] = text[:limit]
    if len(text) > limit or info.st_size > len(head):
        entry["truncated"] = True
    return entry, len(entry["content"])


def _text_of(head: bytes) -> str | None:
    """The bytes as UTF-8 text (a character cut at the end of the read is dropped), or None."""
    if b"\x00" in head:
        return None
    for cut in range(4):
        try:
            return head[: len(head) - cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return None


def save_artifacts(
    ws: Workspace, files: Sequence[Mapping[str, Any]], *, limit: int | None = None
) -> list[str]:
    """Offer the collected files as downloads: those outside out/ are copied into it.

    `limit`: the bytes the copies may take in all (the person's storage allowance)."""
    if limit is not None:
        needed = sum(
            _size(ws, str(item["name"]))
            for item in files
            if not str(item["name"]).startswith("out/")
        )
        if needed > limit:
            raise ToolError(_no_room("the output files", limit, needed))
    saved: list[str] = []
    for item in files:
        rel = str(item["name"])
        if rel.startswith("out/"):
            saved.append(rel)
            continue
        name = PurePosixPath(rel).name
        stem, suffix = os.path.splitext(name)
        target = ws.out_dir / name
        counter = 1
        while os.path.lexists(target):
            counter += 1
            target = ws.out_dir / f"{stem}-{counter}{suffix}"
        source = ws.open_file(ws.root / rel, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(source, "rb") as reader:
            if not stat.S_ISREG(os.fstat(reader.fileno()).st_mode):
                continue
            fd = ws.open_file(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            with os.fdopen(fd, "wb") as writer:
                while chunk := reader.read(1024 * 1024):
                    writer.write(chunk)
        saved.append(ws.relative(target))
    return saved


def _size(ws: Workspace, relative: str) -> int:
    """The size of a regular file of the workspace (0 for anything else), opened without
    following links."""
    try:
        fd = ws.open_file(ws.root / relative, os.O_RDONLY | os.O_NONBLOCK)
    except (WorkspaceError, OSError):
        return 0
    try:
        info = os.fstat(fd)
    finally:
        os.close(fd)
    return info.st_size if stat.S_ISREG(info.st_mode) else 0
