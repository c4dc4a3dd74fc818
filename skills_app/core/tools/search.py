"""Glob and Grep: find files and text inside the conversation workspace."""

from __future__ import annotations

import asyncio
import fnmatch
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from skills_app.core.tools.base import (
    ToolContext,
    ToolError,
    ToolResult,
    bool_arg,
    cap_text,
    str_arg,
)
from skills_app.core.tools.files import is_binary
from skills_app.core.tools.workspace import Workspace

GLOB_LIMIT = 200
GLOB_SCAN_LIMIT = 20_000
GREP_FILE_LIMIT = 200
GREP_LINE_LIMIT = 500
GREP_LINE_CHARS = 300
GREP_MAX_FILE_BYTES = 20 * 1024 * 1024
_SKIP_DIRS = frozenset({".git"})
_OUTPUT_MODES = ("files_with_matches", "content", "count")
_BRACES = re.compile(r"\{([^{}]*)\}")


def _search_base(tool: str, ws: Workspace, path: str | None) -> Path:
    base = ws.resolve(path or ".")
    if not base.exists():
        raise ToolError(
            f"{tool}: path does not exist: {path}. Relative paths start at the workspace root."
        )
    return base


def _inside_root(ws: Workspace, path: Path) -> Path | None:
    """The real path when it stays inside the workspace (symlinks included), else None."""
    try:
        real = path.resolve()
    except (OSError, RuntimeError):
        return None
    return real if real == ws.root or real.is_relative_to(ws.root) else None


def expand_braces(pattern: str) -> list[str]:
    """Expand shell-style braces: "*.{md,txt}" -> ["*.md", "*.txt"]."""
    match = _BRACES.search(pattern)
    if match is None:
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    return [p for alt in match.group(1).split(",") for p in expand_braces(head + alt + tail)]


class GlobTool:
    name = "Glob"
    description = (
        "Find files and folders in the workspace by glob pattern, e.g. '**/*.py' or "
        "'out/*.md' ('**' matches any depth; braces like '*.{md,txt}' are expanded). Searches "
        "from path (default: the workspace root). Results are workspace-relative paths, newest "
        f"first (by modification time), folders marked with a trailing '/', at most {GLOB_LIMIT}."
    )
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "The glob pattern, relative to path."},
            "path": {
                "type": "string",
                "description": "Folder to search from; defaults to the workspace root.",
            },
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }

    async def run(self, input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        """List matching paths, newest first."""
        pattern = str_arg(self.name, input, "pattern")
        path = str_arg(self.name, input, "path", required=False)
        if pattern.startswith("/"):
            raise ToolError(
                "Glob: the pattern must be relative (e.g. '**/*.md'); put the folder in 'path'."
            )
        ws = ctx.workspace
        base = _search_base(self.name, ws, path)
        if not base.is_dir():
            raise ToolError(f"Glob: {path} is a file, not a folder; give a folder as path.")
        text = await asyncio.to_thread(self._glob, ws, base, pattern)
        return ToolResult(cap_text(text, ctx.output_limit))

    def _glob(self, ws: Workspace, base: Path, pattern: str) -> str:
        found: dict[Path, float] = {}
        truncated_scan = False
        try:
            for alt in expand_braces(pattern):
                for match in base.glob(alt):
                    real = _inside_root(ws, match)
                    if real is None or real in found:
                        continue  # symlink leading out, or seen through another spelling
                    try:
                        found[real] = real.stat().st_mtime
                    except OSError:
                        continue
                    if len(found) >= GLOB_SCAN_LIMIT:
                        truncated_scan = True
                        break
        except (ValueError, NotImplementedError) as exc:
            raise ToolError(f"Glob: invalid pattern {pattern!r}: {exc}.") from exc
        if not found:
            return f"No files match {pattern!r} under {ws.relative(base)}."
        ordered = sorted(found, key=lambda p: (-found[p], str(p)))
        shown = [ws.relative(p) + ("/" if p.is_dir() else "") for p in ordered[:GLOB_LIMIT]]
        lines = list(shown)
        if len(ordered) > GLOB_LIMIT or truncated_scan:
            more = f"{len(ordered) - GLOB_LIMIT}" if not truncated_scan else "many"
            lines.append(f"({more} more not shown; narrow the pattern or the path)")
        return "\n".join(lines)


class GrepTool:
    name = "Grep"
    description = (
        "Search file contents in the workspace with a Python regular expression. path may be a "
        "folder (default: the workspace root) or one file; glob filters file names (e.g. '*.md', "
        "'*.{py,txt}'). output_mode: 'files_with_matches' (default, file paths), 'content' "
        "(path:line:text) or 'count' (path:count). Binary files, files over "
        f"{GREP_MAX_FILE_BYTES // (1024 * 1024)} MB and .git folders are skipped; results are "
        "capped and the output says what was cut."
    )
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Regular expression (Python re syntax)."},
            "path": {"type": "string", "description": "File or folder to search; default root."},
            "glob": {"type": "string", "description": "Only search files matching this glob."},
            "ignore_case": {"type": "boolean", "description": "Case-insensitive search."},
            "output_mode": {
                "type": "string",
                "enum": list(_OUTPUT_MODES),
                "description": "What to return; default files_with_matches.",
            },
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }

    async def run(self, input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        """Search and report matches in the chosen output mode."""
        pattern = str_arg(self.name, input, "pattern")
        path = str_arg(self.name, input, "path", required=False)
        glob = str_arg(self.name, input, "glob", required=False)
        mode = str_arg(self.name, input, "output_mode", required=False) or "files_with_matches"
        if mode not in _OUTPUT_MODES:
            raise ToolError(
                f"Grep: output_mode must be one of {', '.join(_OUTPUT_MODES)}; got {mode!r}."
            )
        flags = re.IGNORECASE if bool_arg(self.name, input, "ignore_case") else 0
        try:
            regex = re.compile(pattern, flags)
        except re.error as exc:
            raise ToolError(f"Grep: invalid regular expression {pattern!r}: {exc}.") from exc
        ws = ctx.workspace
        base = _search_base(self.name, ws, path)
        globs = expand_braces(glob) if glob else []
        text = await asyncio.to_thread(self._grep, ws, base, regex, globs, mode)
        return ToolResult(cap_text(text, ctx.output_limit))

    def _files(self, ws: Workspace, base: Path, globs: list[str]) -> Iterator[Path]:
        if base.is_file():
            yield base
            return
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
            for filename in sorted(filenames):
                candidate = Path(dirpath) / filename
                if globs and not self._glob_matches(candidate, base, globs):
                    continue
                real = _inside_root(ws, candidate)
                if real is not None and real.is_file():
                    yield real

    @staticmethod
    def _glob_matches(path: Path, base: Path, globs: list[str]) -> bool:
        rel = path.relative_to(base).as_posix()
        # A glob with a slash is matched against the path from `base`, otherwise the name only.
        return any(fnmatch.fnmatchcase(rel if "/" in g else path.name, g) for g in globs)

    def _grep(
        self, ws: Workspace, base: Path, regex: re.Pattern[str], globs: list[str], mode: str
    ) -> str:
        results: list[str] = []
        files_matched = 0
        lines_matched = 0
        skipped = 0
        for path in self._files(ws, base, globs):
            try:
                if path.stat().st_size > GREP_MAX_FILE_BYTES or is_binary(path):
                    skipped += 1
                    continue
                with path.open(encoding="utf-8", errors="replace") as handle:
                    hits = [
                        (n, line.rstrip("\r\n"))
                        for n, line in enumerate(handle, 1)
                        if regex.search(line)
                    ]
            except OSError:
                skipped += 1
                continue
            if not hits:
                continue
            files_matched += 1
            lines_matched += len(hits)
            rel = ws.relative(path)
            if mode == "files_with_matches":
                if files_matched <= GREP_FILE_LIMIT:
                    results.append(rel)
            elif mode == "count":
                if files_matched <= GREP_FILE_LIMIT:
                    results.append(f"{rel}:{len(hits)}")
            else:
                for number, line in hits:
                    if len(results) >= GREP_LINE_LIMIT:
                        break
                    if len(line) > GREP_LINE_CHARS:
                        line = line[:GREP_LINE_CHARS] + " [line cut]"
                    results.append(f"{rel}:{number}:{line}")
        if not files_matched:
            note = f" ({skipped} binary or oversized files skipped)" if skipped else ""
            return f"No matches for {regex.pattern!r} under {ws.relative(base)}{note}."
        notes: list[str] = []
        if mode == "content" and lines_matched > len(results):
            notes.append(f"{lines_matched - len(results)} more matching lines not shown")
        elif mode != "content" and files_matched > GREP_FILE_LIMIT:
            notes.append(f"{files_matched - GREP_FILE_LIMIT} more matching files not shown")
        if mode == "count":
            notes.append(f"{lines_matched} matching lines in {files_matched} files")
        if skipped:
            notes.append(f"{skipped} binary or oversized files skipped")
        body = "\n".join(results)
        return f"{body}\n\n({'; '.join(notes)})" if notes else body
