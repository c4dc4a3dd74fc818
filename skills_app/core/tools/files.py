"""Read, Write and Edit: file tools confined to the conversation workspace."""

from __future__ import annotations

import asyncio
import io
import os
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any, BinaryIO

from skills_app.core.tools.base import (
    ToolContext,
    ToolError,
    ToolResult,
    cap_text,
)
from skills_app.core.tools.inputs import check_input
from skills_app.core.tools.workspace import Workspace

READ_DEFAULT_LIMIT = 2000
READ_MAX_LINE_CHARS = 2000
EDIT_MAX_BYTES = 10 * 1024 * 1024
_SNIFF_BYTES = 8192
_PATH_HINT = "Relative paths start at the workspace root, e.g. work/notes.md or out/report.md."


def is_binary(handle: BinaryIO) -> bool:
    """True when the start of the file holds a NUL byte (how git and grep tell binary files)."""
    start = handle.read(_SNIFF_BYTES)
    handle.seek(0)
    return b"\x00" in start


def open_read(ws: Workspace, path: Path) -> BinaryIO:
    """Open a resolved workspace file for reading, with no symlink in any component."""
    # O_NONBLOCK: a FIFO swapped in after the checks must not hang the read.
    fd = ws.open_file(path, os.O_RDONLY | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ToolError(f"{ws.relative(path)} is not a regular file.")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def _text(handle: BinaryIO, **options: Any) -> io.TextIOWrapper:
    return io.TextIOWrapper(handle, encoding="utf-8", **options)


def _existing_file(tool: str, ws: Workspace, file_path: str) -> Path:
    path = ws.resolve(file_path)
    if not path.exists():
        raise ToolError(f"{tool}: file does not exist: {file_path}. {_PATH_HINT}")
    if path.is_dir():
        raise ToolError(
            f"{tool}: {file_path} is a directory, not a file. Use Glob or Bash `ls` to list it."
        )
    if not path.is_file():
        raise ToolError(f"{tool}: {file_path} is not a regular file.")
    return path


def _open_for_write(ws: Workspace, path: Path) -> IO[str]:
    # No symlink in any component: one planted after resolve() is refused, never followed.
    fd = ws.open_file(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, make_dirs=True)
    return os.fdopen(fd, "w", encoding="utf-8", newline="")


def _artifacts(ws: Workspace, path: Path) -> tuple[str, ...]:
    return (ws.relative(path),) if ws.is_output(path) else ()


def _lines(handle: IO[str]) -> Iterator[tuple[str, bool]]:
    """Yield (line without its newline, was_cut) without ever holding an overlong line whole."""
    while True:
        chunk = handle.readline(READ_MAX_LINE_CHARS + 1)
        if not chunk:
            return
        if chunk.endswith("\n") or len(chunk) <= READ_MAX_LINE_CHARS:
            yield chunk.rstrip("\r\n"), False
            continue
        while True:  # drain the rest of an overlong line
            rest = handle.readline(64 * 1024)
            if not rest or rest.endswith("\n"):
                break
        yield chunk[:READ_MAX_LINE_CHARS], True


class ReadTool:
    name = "Read"
    description = (
        "Read a text file from the workspace. Output is numbered like `cat -n` (line number, tab, "
        f"text). Reads up to {READ_DEFAULT_LIMIT} lines from the start unless you give offset "
        "(1-based first line) and limit (number of lines); lines longer than "
        f"{READ_MAX_LINE_CHARS} characters are cut. Paths are relative to the workspace root "
        "(work/, out/, skills/<name>/...) or absolute inside it. Binary files and directories "
        "cannot be read; use Bash for those."
    )
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "minLength": 1, "description": "The file to read."},
            "offset": {
                "type": "integer",
                "minimum": 1,
                "description": "Line number to start from (1-based). Only for large files.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "description": "How many lines to read. Only for large files.",
            },
        },
        "required": ["file_path"],
        "additionalProperties": False,
    }

    async def run(self, input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        """Return the numbered lines of one text file."""
        check_input(self.name, self.input_schema, input)
        file_path: str = input["file_path"]
        offset = int(input.get("offset", 1))
        limit = int(input.get("limit", READ_DEFAULT_LIMIT))
        path = _existing_file(self.name, ctx.workspace, file_path)
        text = await asyncio.to_thread(self._read, ctx.workspace, path, file_path, offset, limit)
        return ToolResult(cap_text(text, ctx.output_limit))

    def _read(self, ws: Workspace, path: Path, shown: str, offset: int, limit: int) -> str:
        raw = open_read(ws, path)
        if is_binary(raw):
            raw.close()
            raise ToolError(
                f"Read: {shown} is a binary file; Read only shows text. Use Bash to inspect it."
            )
        out: list[str] = []
        total = 0
        cut_lines = 0
        with _text(raw, errors="replace") as handle:
            for number, (line, was_cut) in enumerate(_lines(handle), start=1):
                total = number
                if offset <= number < offset + limit:
                    cut_lines += was_cut
                    out.append(f"{number:>6}\t{line}{' [line cut]' if was_cut else ''}")
        if total == 0:
            return f"({shown} is empty)"
        if not out:
            raise ToolError(
                f"Read: offset {offset} is past the end of {shown}, which has {total} lines."
            )
        last = offset + len(out) - 1
        notes = []
        if offset > 1 or last < total:
            notes.append(f"showing lines {offset}-{last} of {total}")
            if last < total:
                notes.append(f"call Read with offset={last + 1} to continue")
        if cut_lines:
            notes.append(f"{cut_lines} long line(s) cut at {READ_MAX_LINE_CHARS} characters")
        body = "\n".join(out)
        return f"{body}\n\n({'; '.join(notes)})" if notes else body


class WriteTool:
    name = "Write"
    description = (
        "Create or overwrite a text file in the workspace with the given content, creating parent "
        "folders as needed. Put results meant for the user in out/ (they become downloadable "
        "artifacts) and scratch files in work/. Staged skill folders under skills/ are read-only."
    )
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "minLength": 1, "description": "The file to write."},
            "content": {"type": "string", "description": "The full new content of the file."},
        },
        "required": ["file_path", "content"],
        "additionalProperties": False,
    }

    async def run(self, input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        """Write the file and report its size."""
        check_input(self.name, self.input_schema, input)
        file_path: str = input["file_path"]
        content: str = input["content"]
        ws = ctx.workspace
        path = ws.resolve(file_path, for_write=True)
        if path.is_dir():
            raise ToolError(f"Write: {file_path} is a directory; give a file path inside it.")
        existed = path.exists()
        size = len(content.encode("utf-8"))
        # The quota: the whole new content must fit in what the person has left.
        allowance = await ctx.storage.reserve(ws, size) if ctx.storage is not None else None
        try:
            with _open_for_write(ws, path) as handle:
                handle.write(content)
        except OSError as exc:
            raise ToolError(f"Write: cannot write {file_path}: {exc.strerror or exc}.") from exc
        finally:
            if ctx.storage is not None and allowance is not None:
                await ctx.storage.settle(ws, allowance)
        verb = "Updated" if existed else "Created"
        return ToolResult(
            f"{verb} {ws.relative(path)} ({size} bytes).", artifacts=_artifacts(ws, path)
        )


class EditTool:
    name = "Edit"
    description = (
        "Replace an exact piece of text in a workspace file. old_string must match the file "
        "exactly (including whitespace and indentation) and, unless replace_all is true, occur "
        "exactly once; add surrounding lines to make it unique. Read the file first. Use Write "
        "to create new files."
    )
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "minLength": 1, "description": "The file to change."},
            "old_string": {"type": "string", "description": "The exact text to replace."},
            "new_string": {"type": "string", "description": "The replacement text."},
            "replace_all": {
                "type": "boolean",
                "default": False,
                "description": "Replace every occurrence instead of exactly one.",
            },
        },
        "required": ["file_path", "old_string", "new_string"],
        "additionalProperties": False,
    }

    async def run(self, input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        """Apply one exact-match replacement (or all of them) and report the count."""
        check_input(self.name, self.input_schema, input)
        file_path: str = input["file_path"]
        old: str = input["old_string"]
        new: str = input["new_string"]
        replace_all: bool = input.get("replace_all", False)
        if old == "":
            raise ToolError(
                "Edit: old_string is empty. Give the text to replace, or use Write to create a file."
            )
        if old == new:
            raise ToolError(
                "Edit: old_string and new_string are identical, so there is nothing to change."
            )
        ws = ctx.workspace
        ws.resolve(
            file_path, for_write=True
        )  # refuse skills/ before saying anything about the file
        path = _existing_file(self.name, ws, file_path)
        if path.stat().st_size > EDIT_MAX_BYTES:
            raise ToolError(
                f"Edit: {file_path} is larger than {EDIT_MAX_BYTES} bytes; use Bash for it."
            )
        raw = open_read(ws, path)
        if is_binary(raw):
            raw.close()
            raise ToolError(f"Edit: {file_path} is a binary file; only text files can be edited.")
        try:
            # newline="" keeps CRLF files CRLF.
            with _text(raw, newline="") as handle:
                text = handle.read()
        except UnicodeDecodeError as exc:
            raise ToolError(f"Edit: {file_path} is not UTF-8 text; use Bash to change it.") from exc
        count = text.count(old)
        if count == 0:
            raise ToolError(
                f"Edit: old_string not found in {file_path}. Read the file and copy the exact text, "
                "including whitespace and line breaks."
            )
        if count > 1 and not replace_all:
            raise ToolError(
                f"Edit: old_string found {count} times in {file_path}; add surrounding context "
                "to make it unique, or set replace_all to true."
            )
        updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
        growth = max(0, len(updated.encode("utf-8")) - len(text.encode("utf-8")))
        allowance = await ctx.storage.reserve(ws, growth) if ctx.storage is not None else None
        try:
            with _open_for_write(ws, path) as handle:
                handle.write(updated)
        except OSError as exc:
            raise ToolError(f"Edit: cannot write {file_path}: {exc.strerror or exc}.") from exc
        finally:
            if ctx.storage is not None and allowance is not None:
                await ctx.storage.settle(ws, allowance)
        done = count if replace_all else 1
        return ToolResult(
            f"Replaced {done} occurrence{'s' if done != 1 else ''} in {ws.relative(path)}.",
            artifacts=_artifacts(ws, path),
        )
