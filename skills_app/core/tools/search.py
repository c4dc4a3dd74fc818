"""Glob and Grep: find files and text inside the conversation workspace.

Bounded by construction, because both run without approval:
- patterns (Grep's regex and Glob's translated glob) are compiled with RE2, whose matching time
  is linear in the text: `(a+)+$` cannot backtrack catastrophically as it does in Python's `re`;
- the walk never follows a symlinked folder, opens files with no link in any component, and a
  symlinked file counts only when its target is inside the workspace;
- both run in a thread of their own (RE2 releases the GIL) and stop at `walk.SEARCH_SECONDS`,
  at `walk.SEARCH_ENTRY_LIMIT` walked entries and below `walk.SEARCH_MAX_DEPTH` folder levels,
  saying so in the result; a cancelled call (Stop) stops its walk at the next entry;
- `ToolContext.path_allowed` (built from the Read deny rules) hides files one by one, so a deny
  on `Read(./work/secret/**)` also keeps that content out of Grep and Glob results.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import re2

from skills_app.core.rulematch import glob_regex
from skills_app.core.tools.base import (
    ToolContext,
    ToolError,
    ToolResult,
    cap_text,
)
from skills_app.core.tools.files import is_binary, open_read
from skills_app.core.tools.inputs import check_input
from skills_app.core.tools.walk import (
    Budget,
    Walk,
    compile_regex,
    expand_braces,
    run_cancellable,
    search_base,
)
from skills_app.core.tools.workspace import Workspace

GLOB_LIMIT = 200
GLOB_SCAN_LIMIT = 20_000
GREP_FILE_LIMIT = 200
GREP_LINE_LIMIT = 500
GREP_LINE_CHARS = 300
GREP_MAX_FILE_BYTES = 20 * 1024 * 1024
_SKIP_DIRS = frozenset({".git"})
_OUTPUT_MODES = ("files_with_matches", "content", "count")


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
            "pattern": {
                "type": "string",
                "minLength": 1,
                "description": "The glob pattern, relative to path.",
            },
            "path": {
                "type": "string",
                "minLength": 1,
                "description": "Folder to search from; defaults to the workspace root.",
            },
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }

    async def run(self, input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        """List matching paths, newest first."""
        check_input(self.name, self.input_schema, input)
        pattern: str = input["pattern"]
        path: str | None = input.get("path")
        if pattern.startswith("/"):
            raise ToolError(
                "Glob: the pattern must be relative (e.g. '**/*.md'); put the folder in 'path'."
            )
        ws = ctx.workspace
        base = search_base(self.name, ws, path)
        if not base.is_dir():
            raise ToolError(f"Glob: {path} is a file, not a folder; give a folder as path.")
        matchers = []
        for alt in expand_braces(pattern):
            try:
                matchers.append(compile_regex(glob_regex(os.path.normpath(alt))))
            except ValueError as exc:
                raise ToolError(f"Glob: invalid pattern {pattern!r}: {exc}.") from exc
        walk = Walk(ws, ctx.path_allowed, Budget())
        text = await run_cancellable(lambda: self._glob(walk, base, pattern, matchers), walk.budget)
        return ToolResult(cap_text(text, ctx.output_limit))

    def _glob(self, walk: Walk, base: Path, pattern: str, matchers: list[re2._Regexp]) -> str:
        ws = walk.ws
        found: dict[Path, tuple[float, bool]] = {}
        truncated_scan = False
        for walked, real, is_dir in walk.entries_below(base):
            rel = walked.relative_to(base).as_posix()
            if real in found or not any(m.fullmatch(rel) for m in matchers):
                continue  # seen through another spelling, or no match
            if ".." in Path(pattern).parts:
                continue  # a pattern climbing out of the base never matches
            try:
                found[real] = (real.stat().st_mtime, is_dir)
            except OSError:
                continue
            if len(found) >= GLOB_SCAN_LIMIT:
                truncated_scan = True
                break
        if not found:
            note = walk.note()
            return f"No files match {pattern!r} under {ws.relative(base)}." + (
                f" ({note})" if note else ""
            )
        ordered = sorted(found, key=lambda p: (-found[p][0], str(p)))
        lines = [ws.relative(p) + ("/" if found[p][1] else "") for p in ordered[:GLOB_LIMIT]]
        if len(ordered) > GLOB_LIMIT or truncated_scan:
            more = f"{len(ordered) - GLOB_LIMIT}" if not truncated_scan else "many"
            lines.append(f"({more} more not shown; narrow the pattern or the path)")
        if walk.note():
            lines.append(f"({walk.note()})")
        return "\n".join(lines)


class GrepTool:
    name = "Grep"
    description = (
        "Search file contents in the workspace with a regular expression (RE2 syntax: like "
        "Python's re, without backreferences or look-around). path may be a folder (default: "
        "the workspace root) or one file; glob filters file names (e.g. '*.md', "
        "'*.{py,txt}'). output_mode: 'files_with_matches' (default, file paths), 'content' "
        "(path:line:text) or 'count' (path:count). Binary files, files over "
        f"{GREP_MAX_FILE_BYTES // (1024 * 1024)} MB and .git folders are skipped; results are "
        "capped and the output says what was cut."
    )
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "pattern": {
                "type": "string",
                "minLength": 1,
                "description": "Regular expression (RE2 syntax).",
            },
            "path": {
                "type": "string",
                "minLength": 1,
                "description": "File or folder to search; default root.",
            },
            "glob": {
                "type": "string",
                "minLength": 1,
                "description": "Only search files matching this glob.",
            },
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
        check_input(self.name, self.input_schema, input)
        pattern: str = input["pattern"]
        path: str | None = input.get("path")
        glob: str | None = input.get("glob")
        mode: str = input.get("output_mode", "files_with_matches")
        ignore_case: bool = input.get("ignore_case", False)
        try:
            regex = compile_regex(pattern, ignore_case=ignore_case)
        except ValueError as exc:
            raise ToolError(
                f"Grep: invalid regular expression {pattern!r}: {exc}. Grep uses RE2 syntax "
                "(like Python's re, without backreferences or look-around)."
            ) from exc
        ws = ctx.workspace
        base = search_base(self.name, ws, path)
        globs: list[tuple[bool, re2._Regexp]] = []
        for alt in expand_braces(glob) if glob else []:
            try:
                globs.append(("/" in alt, compile_regex(glob_regex(alt))))
            except ValueError as exc:
                raise ToolError(f"Grep: invalid glob {glob!r}: {exc}.") from exc
        walk = Walk(ws, ctx.path_allowed, Budget())
        text = await run_cancellable(
            lambda: self._grep(walk, base, regex, pattern, globs, mode), walk.budget
        )
        return ToolResult(cap_text(text, ctx.output_limit))

    def _files(
        self, walk: Walk, base: Path, globs: list[tuple[bool, re2._Regexp]]
    ) -> Iterator[Path]:
        if base.is_file():
            if walk.visible(base):
                yield base
            return
        for walked, real, is_dir in walk.entries_below(base, _SKIP_DIRS):
            if is_dir:
                continue
            if globs and not self._glob_matches(walked, base, globs):
                continue
            yield real

    @staticmethod
    def _glob_matches(path: Path, base: Path, globs: list[tuple[bool, re2._Regexp]]) -> bool:
        rel = path.relative_to(base).as_posix()
        # A glob with a slash is matched against the path from `base`, otherwise the name only.
        return any(m.fullmatch(rel if slash else path.name) for slash, m in globs)

    def _search_file(
        self, ws: Workspace, path: Path, regex: re2._Regexp, walk: Walk
    ) -> list[tuple[int, str]] | None:
        """Matching (line number, line) pairs; None when the file is skipped."""
        if path.stat().st_size > GREP_MAX_FILE_BYTES:
            return None
        with open_read(ws, path) as raw:
            if is_binary(raw):
                return None
            hits: list[tuple[int, str]] = []
            for number, line in enumerate(raw, 1):
                if number % 4096 == 0 and walk.out_of_budget():
                    break
                text = line.decode("utf-8", "replace").rstrip("\r\n")
                if regex.search(text):
                    hits.append((number, text))
        return hits

    def _grep(
        self,
        walk: Walk,
        base: Path,
        regex: re2._Regexp,
        pattern: str,
        globs: list[tuple[bool, re2._Regexp]],
        mode: str,
    ) -> str:
        ws = walk.ws
        results: list[str] = []
        files_matched = 0
        lines_matched = 0
        skipped = 0
        for path in self._files(walk, base, globs):
            if walk.out_of_budget():
                break
            try:
                hits = self._search_file(ws, path, regex, walk)
            except (OSError, ToolError):
                hits = None
            if hits is None:
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
            notes = [f"{skipped} binary or oversized files skipped"] if skipped else []
            if walk.note():
                notes.append(walk.note())
            extra = f" ({'; '.join(notes)})" if notes else ""
            return f"No matches for {pattern!r} under {ws.relative(base)}{extra}."
        notes = []
        if mode == "content" and lines_matched > len(results):
            notes.append(f"{lines_matched - len(results)} more matching lines not shown")
        elif mode != "content" and files_matched > GREP_FILE_LIMIT:
            notes.append(f"{files_matched - GREP_FILE_LIMIT} more matching files not shown")
        if mode == "count":
            notes.append(f"{lines_matched} matching lines in {files_matched} files")
        if skipped:
            notes.append(f"{skipped} binary or oversized files skipped")
        if walk.note():
            notes.append(walk.note())
        body = "\n".join(results)
        return f"{body}\n\n({'; '.join(notes)})" if notes else body
