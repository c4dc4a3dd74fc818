"""`skill_run`, the command tool of the `system-prompt` profile: a command for a loaded skill, run
in the conversation workspace under the Bash rules, reporting stdout, stderr, exit code and files."""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import shlex
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..permissions import ToolCall
from ..tools.base import ToolError
from ..tools.bash import BashTool
from ..tools.env import command_with_env, skill_run_env
from ..tools.workspace import Workspace, WorkspaceError
from ..transcript import tool_result_block
from .base import SkillSession

SKILL_RUN_TOOL: dict[str, Any] = {
    "name": "skill_run",
    "description": (
        "Run a shell command for a loaded skill in the conversation workspace. The skill folder is "
        "staged read-only at $SKILLS_DIR/<name>; write outputs to $OUTPUT_DIR. Returns stdout, "
        "stderr, exit_code, timed_out, duration and the output files matching output_files."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "skill": {"type": "string"},
            "command": {"type": "string"},
            "cwd": {
                "type": "string",
                "description": "Working directory, relative to the workspace.",
            },
            "env": {"type": "object", "additionalProperties": {"type": "string"}},
            "output_files": {"type": "array", "items": {"type": "string"}},
            "timeout": {"type": "number", "description": "Seconds."},
        },
        "required": ["skill", "command"],
    },
}


async def run_skill_command(
    session: SkillSession, tool_use_id: str, name: str, tool_input: dict[str, Any]
) -> dict[str, Any]:
    """Run one `skill_run` call and return its tool_result block."""
    command = str(tool_input.get("command") or "").strip()
    if not command:
        return _error(tool_use_id, "command is empty.")
    try:
        # An allow-list of plain names: nothing that makes bash or an interpreter load code.
        env = skill_run_env(tool_input.get("env"))
    except ToolError as exc:
        return _error(tool_use_id, str(exc))
    # skill_run commands are governed by the Bash rules, with the environment in plain sight.
    shown = command_with_env(env, command)
    decision = await session.decide(ToolCall(tool="Bash", input={"command": shown}))
    if decision.behavior != "allow":
        return _error(tool_use_id, f"Permission denied: {decision.reason}")
    ctx = session.tool_context()
    workspace = ctx.workspace
    try:
        cwd_path = workspace.resolve(str(tool_input.get("cwd") or "."))
        err_file = workspace.ensure_tmp() / f"stderr-{uuid.uuid4().hex}"
    except Exception as exc:
        return _error(tool_use_id, str(exc))
    wrapped = f"cd {shlex.quote(str(cwd_path))} && ( {command}\n) 2> {shlex.quote(str(err_file))}"
    run_input: dict[str, Any] = {"command": wrapped}
    if tool_input.get("timeout"):
        run_input["timeout"] = tool_input["timeout"]
    started = time.monotonic()
    run_ctx = replace(ctx, env={**ctx.env, **env, "SKILL_NAME": name})
    try:
        result = await BashTool().run(run_input, run_ctx)
    except ToolError as exc:  # e.g. no sandbox and no permission to run without one
        return _error(tool_use_id, str(exc))
    duration = round(time.monotonic() - started, 3)
    stderr = _read_back(workspace, err_file, ctx.output_limit)
    stdout, _sep, status = result.content.rpartition("\n\n")
    exit_code: int | None = None
    if status.startswith("Exit code: "):
        try:
            exit_code = int(status.removeprefix("Exit code: ").split()[0])
        except ValueError:
            exit_code = None
    patterns = [str(p) for p in tool_input.get("output_files") or []]
    files = [
        rel
        for rel in _workspace_files(workspace.root)
        if any(fnmatch.fnmatch(rel, p) for p in patterns)
    ]
    payload = {
        "stdout": stdout if status else result.content,
        "stderr": stderr,
        "exit_code": exit_code,
        "timed_out": "timed out" in status,
        "duration": duration,
        "output_files": files,
    }
    return tool_result_block(
        tool_use_id, json.dumps(payload, ensure_ascii=False), is_error=result.is_error
    )


def _read_back(workspace: Workspace, path: Path, limit: int) -> str:
    """The tail of the command's stderr file, opened without following a link the command may
    have put in its place; the file is removed either way."""
    try:
        fd = workspace.open_file(path, os.O_RDONLY)
    except (WorkspaceError, OSError):
        text = ""
    else:
        with os.fdopen(fd, "rb") as handle:
            text = handle.read().decode("utf-8", errors="replace")
    with contextlib.suppress(OSError):
        path.unlink()
    return text[-limit:]


def _workspace_files(root: Path) -> list[str]:
    out: list[str] = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if rel.parts and rel.parts[0] in {"skills"} or any(p.startswith(".") for p in rel.parts):
            continue
        if path.is_file():
            out.append(str(rel))
    return out


def _error(tool_use_id: str, message: str) -> dict[str, Any]:
    return tool_result_block(tool_use_id, f"Error: {message}", is_error=True)
