"""learn-claude-code s05's own tools (`bash`, `read_file`, `write_file`, `edit_file`), run safely.

"As the source design", the `tool-result` profile offers the design's tool set instead of
Skillscope's Read/Write/Edit/Glob/Grep/Bash: the names, input schemas and result texts are the
design's (seed 001 shows the dispatch map, `TOOL_HANDLERS`; the four schemas and the handlers'
result texts are those of learn-claude-code's `agents/s05_skill_loading.py`, which the article
walks through). What runs them is Skillscope's:

- every path goes through the conversation's `Workspace` (no escape, no link followed, staged
  skills read-only) and every command through the sandboxed `BashTool` (scrubbed environment,
  limits, no process left behind);
- each call is decided by the permission rules as the Skillscope tool it stands for
  (`permission_call`: `bash` as `Bash(command)`, `read_file` as `Read`, `write_file` as
  `Write`, `edit_file` as `Edit`), so deny rules, ask rules and approvals apply unchanged;
- results never carry the API's `is_error`: the design answers failures as "Error: ..." text.

Where the design would print a Python exception, the text is the exception's message as Python
words it (`[Errno 2] No such file or directory: '/path'`) or, for what only Skillscope refuses
(writing into a staged skill, a file too large to read), Skillscope's own message.
"""

from __future__ import annotations

import asyncio
import errno
import os
import shlex
import stat
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..permissions import ToolCall
from ..tools.base import ToolContext, ToolError, ToolResult
from ..tools.bash import BashTool
from ..tools.inputs import check_input
from ..tools.workspace import Workspace, WorkspaceError

DANGEROUS = ("rm -rf /", "sudo", "shutdown", "reboot", "> /dev/")
TIMEOUT_SECONDS = 120
OUTPUT_CHARS = 50_000
# More than the design's reads ever need: a larger file is refused rather than read whole.
MAX_FILE_BYTES = 10 * 1024 * 1024
# Enough bytes of stdout to give OUTPUT_CHARS characters of any UTF-8 text.
_HEAD_BYTES = OUTPUT_CHARS * 4


def _schema(properties: dict[str, Any], *required: str) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required)}


_STRING = {"type": "string"}


class _Paths:
    """The design's `safe_path`, on the workspace: the error text when `path` leaves it."""

    @staticmethod
    def resolve(ws: Workspace, path: str, *, for_write: bool = False) -> Path:
        real = (ws.root / path).resolve()
        if real != ws.root and not real.is_relative_to(ws.root):
            raise ToolError(f"Path escapes workspace: {path}")
        return ws.resolve(path, for_write=for_write)


def _os_error(exc: OSError, path: Path) -> str:
    # As Python words the exception the design's handler would catch.
    code = exc.errno or errno.EIO
    return f"[Errno {code}] {os.strerror(code)}: '{path}'"


def _read(ws: Workspace, path: Path) -> str:
    """The file's text as `Path.read_text()` returns it (UTF-8, universal newlines)."""
    try:
        fd = ws.open_file(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise ToolError(_os_error(exc, path)) from exc
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if stat.S_ISDIR(info.st_mode):
            raise ToolError(_os_error(IsADirectoryError(errno.EISDIR, ""), path))
        if not stat.S_ISREG(info.st_mode):
            raise ToolError(f"{ws.relative(path)} is not a regular file.")
        if info.st_size > MAX_FILE_BYTES:
            raise ToolError(f"{ws.relative(path)} is larger than {MAX_FILE_BYTES} bytes.")
        os.set_blocking(handle.fileno(), True)
        data = handle.read(MAX_FILE_BYTES + 1)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(str(exc)) from exc
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _write(ws: Workspace, path: Path, content: str) -> None:
    if path.is_dir():
        raise ToolError(_os_error(IsADirectoryError(errno.EISDIR, ""), path))
    fd = ws.open_file(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, make_dirs=True)
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
        handle.write(content)


async def _write_within_quota(ctx: ToolContext, path: Path, content: str, growth: int) -> None:
    """Write as Skillscope's Write and Edit do: the bytes it adds reserved from the person's
    storage quota first (a refusal, `StorageFull`, is a ToolError: the design's "Error: ...")."""
    ws = ctx.workspace
    allowance = await ctx.storage.reserve(ws, growth) if ctx.storage is not None else None
    try:
        await asyncio.to_thread(_write, ws, path, content)
    finally:
        if ctx.storage is not None and allowance is not None:
            await ctx.storage.settle(ws, allowance)


def _artifacts(ws: Workspace, path: Path) -> tuple[str, ...]:
    return (ws.relative(path),) if ws.is_output(path) else ()


async def _guarded(tool: Any, input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
    """Run one handler; a failure is the design's "Error: ..." text, never an API error."""
    try:
        # A malformed call gets Skillscope's sentence naming the field (the design: a KeyError).
        check_input(tool.name, tool.input_schema, input)
        result: ToolResult = await tool.handle(input, ctx)
        return result
    except (ToolError, WorkspaceError, OSError) as exc:
        return ToolResult(f"Error: {exc}")


class DesignBash:
    name = "bash"
    decided_as = "Bash"
    description = "Run a shell command."
    input_schema: dict[str, Any] = _schema({"command": _STRING}, "command")

    def permission_call(self, input: Mapping[str, Any]) -> ToolCall:
        return ToolCall(tool="Bash", input={"command": str(input.get("command", ""))})

    async def run(self, input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        """The design's `run_bash`: stdout then stderr, stripped, cut at 50,000 characters."""
        return await _guarded(self, input, ctx)

    async def handle(self, input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        command = str(input["command"])
        if any(word in command for word in DANGEROUS):
            return ToolResult("Error: Dangerous command blocked")
        ws = ctx.workspace
        tmp = ws.ensure_tmp()
        out_file = tmp / f"stdout-{uuid.uuid4().hex}"
        err_file = tmp / f"stderr-{uuid.uuid4().hex}"
        # `subprocess.run(command, shell=True, cwd=WORKDIR)` runs /bin/sh in the workspace root;
        # both streams go to files so stdout comes first, as the design joins them.
        wrapped = (
            f"( sh -c {shlex.quote(command)}\n) > {shlex.quote(str(out_file))} "
            f"2> {shlex.quote(str(err_file))}"
        )
        try:
            result = await BashTool().run({"command": wrapped, "timeout": TIMEOUT_SECONDS}, ctx)
            stdout = await asyncio.to_thread(_head, ws, out_file)
            stderr = await asyncio.to_thread(_head, ws, err_file)
        finally:
            for leftover in (out_file, err_file):
                leftover.unlink(missing_ok=True)
        if result.content.rpartition("\n\n")[2].startswith("Command timed out"):
            return ToolResult(f"Error: Timeout ({TIMEOUT_SECONDS}s)", artifacts=result.artifacts)
        output = (stdout + stderr).strip()
        return ToolResult(output[:OUTPUT_CHARS] or "(no output)", artifacts=result.artifacts)


def _head(ws: Workspace, path: Path) -> str:
    """The start of a command's output file, opened without following a planted link."""
    try:
        fd = ws.open_file(path, os.O_RDONLY | os.O_NONBLOCK)
    except (WorkspaceError, OSError):
        return ""
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return ""
        return handle.read(_HEAD_BYTES).decode("utf-8", errors="replace")


class DesignReadFile:
    name = "read_file"
    decided_as = "Read"
    description = "Read file contents."
    input_schema: dict[str, Any] = _schema({"path": _STRING, "limit": {"type": "integer"}}, "path")

    def permission_call(self, input: Mapping[str, Any]) -> ToolCall:
        return ToolCall(tool="Read", input={"file_path": str(input.get("path", ""))})

    async def run(self, input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        """The design's `run_read`: the lines, the first `limit` of them and a count of the rest."""
        return await _guarded(self, input, ctx)

    async def handle(self, input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        path, limit = str(input["path"]), input.get("limit")
        ws = ctx.workspace
        real = _Paths.resolve(ws, path)
        lines = (await asyncio.to_thread(_read, ws, real)).splitlines()
        if limit and limit < len(lines):
            lines = [*lines[:limit], f"... ({len(lines) - limit} more)"]
        return ToolResult("\n".join(lines)[:OUTPUT_CHARS])


class DesignWriteFile:
    name = "write_file"
    decided_as = "Write"
    description = "Write content to file."
    input_schema: dict[str, Any] = _schema({"path": _STRING, "content": _STRING}, "path", "content")

    def permission_call(self, input: Mapping[str, Any]) -> ToolCall:
        tool_input = {"file_path": str(input.get("path", "")), "content": input.get("content", "")}
        return ToolCall(tool="Write", input=tool_input)

    async def run(self, input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        """The design's `run_write`: "Wrote N bytes", N counted in characters as the design does."""
        return await _guarded(self, input, ctx)

    async def handle(self, input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        path, content = str(input["path"]), str(input["content"])
        ws = ctx.workspace
        real = _Paths.resolve(ws, path, for_write=True)
        await _write_within_quota(ctx, real, content, len(content.encode("utf-8")))
        return ToolResult(f"Wrote {len(content)} bytes", artifacts=_artifacts(ws, real))


class DesignEditFile:
    name = "edit_file"
    decided_as = "Edit"
    description = "Replace exact text in file."
    input_schema: dict[str, Any] = _schema(
        {"path": _STRING, "old_text": _STRING, "new_text": _STRING}, "path", "old_text", "new_text"
    )

    def permission_call(self, input: Mapping[str, Any]) -> ToolCall:
        tool_input = {
            "file_path": str(input.get("path", "")),
            "old_string": input.get("old_text", ""),
            "new_string": input.get("new_text", ""),
        }
        return ToolCall(tool="Edit", input=tool_input)

    async def run(self, input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        """The design's `run_edit`: the first occurrence replaced, "Edited PATH"."""
        return await _guarded(self, input, ctx)

    async def handle(self, input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        path, old, new = str(input["path"]), str(input["old_text"]), str(input["new_text"])
        ws = ctx.workspace
        real = _Paths.resolve(ws, path, for_write=True)
        content = await asyncio.to_thread(_read, ws, real)
        if old not in content:
            return ToolResult(f"Error: Text not found in {path}")
        updated = content.replace(old, new, 1)
        growth = max(0, len(updated.encode("utf-8")) - len(content.encode("utf-8")))
        await _write_within_quota(ctx, real, updated, growth)
        return ToolResult(f"Edited {path}", artifacts=_artifacts(ws, real))


DESIGN_TOOLS = (DesignBash(), DesignReadFile(), DesignWriteFile(), DesignEditFile())
