"""`skill_run`, the command tool of the `system-prompt` profile, as the toolset design runs it.

One call: check that the conversation may use the skill (`Skill(NAME)`, as a load is checked;
no second question for one loaded this turn), then the command under the Bash rules (with its
environment in plain sight); stage the skill in the workspace at `skills/<name>`, loaded or not
(again only when its digest or the staged copy changed), copy the declared `inputs` in, make a
fresh `runs/<id>/`, run the command with bash in the staged skill's folder (or `cwd`, relative
to it) with WORKSPACE_DIR, SKILLS_DIR, WORK_DIR, OUTPUT_DIR, RUN_DIR and SKILL_NAME set, then
collect the files matching `output_files` (globs, `$OUTPUT_DIR/*.txt` style) and, with
`save_as_artifacts`, offer them as downloads. The result is the design's JSON: stdout, stderr,
exit_code, timed_out, duration_ms and output_files.

The command runs through the ordinary Bash tool, so the sandbox, the scrubbed environment, the
limits and the read-only staged skill apply as they do to every command.

"As the source design" (seed 004, "2.2 深入 skill_run"): the schema is `SkillRunInput`'s
(`SKILL_RUN_DESIGN_TOOL`), the command runs with `bash -lc`, it is allowed unless a rule denies
or asks (the design asks no one), the result has exactly `SkillRunOutput`'s fields (no
`artifact_files`, though files are still offered with `save_as_artifacts`), and the run folder
keeps the run's record (`record.json`: the command, where it ran and the result).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import shlex
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from ..permissions import Decision, ToolCall
from ..tools.base import ToolContext, ToolError
from ..tools.bash import BashTool
from ..tools.env import command_with_env, skill_run_env
from ..tools.walk import Budget, run_cancellable
from ..tools.workspace import Workspace, WorkspaceError
from ..transcript import tool_result_block
from .base import SkillSession, ToolAnswer
from .run_files import (
    MAX_WALKED,
    collect_outputs,
    expand,
    save_artifacts,
    skill_names,
    stage_inputs,
)
from .shared import error_answer
from .skill_state import skill_state

_T = TypeVar("_T")

SKILL_RUN_TOOL: dict[str, Any] = {
    "name": "skill_run",
    "description": (
        "Run a command inside a skill workspace. "
        "Stages the entire skill directory and runs a single command."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "skill": {"type": "string", "description": "The skill's name."},
            "command": {"type": "string", "description": "The shell command, run with bash."},
            "cwd": {
                "type": "string",
                "description": "Folder to run in, relative to the skill's root (default: the root).",
            },
            "env": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "Extra environment variables (plain names and values).",
            },
            "output_files": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Globs of files to return, e.g. $OUTPUT_DIR/*.txt or out/**/*.json.",
            },
            "timeout": {"type": "integer", "description": "Seconds before the command is stopped."},
            "inputs": {
                "type": "array",
                "description": (
                    "Files to copy into the workspace first. src: workspace://PATH, "
                    "artifact://NAME or skill://SKILL/PATH; dst: a workspace path "
                    "(default work/inputs/<file name>)."
                ),
                "items": {
                    "type": "object",
                    "properties": {
                        "src": {"type": "string"},
                        "dst": {"type": "string"},
                        "mode": {"type": "string"},
                    },
                    "required": ["src"],
                },
            },
            "save_as_artifacts": {
                "type": "boolean",
                "description": "Also offer the collected files to the user as downloads.",
            },
        },
        "required": ["skill", "command"],
    },
}


# `SkillRunInput.model_json_schema()` for the article's model; its `WorkspaceInputSpec` is not
# shown, so the item has the three fields Skillscope accepts (src, dst, mode).
SKILL_RUN_DESIGN_TOOL: dict[str, Any] = {
    "name": "skill_run",
    "description": SKILL_RUN_TOOL["description"],
    "input_schema": {
        "$defs": {
            "WorkspaceInputSpec": {
                "properties": {
                    "src": {"title": "Src", "type": "string"},
                    "dst": {"default": "", "title": "Dst", "type": "string"},
                    "mode": {"default": "copy", "title": "Mode", "type": "string"},
                },
                "required": ["src"],
                "title": "WorkspaceInputSpec",
                "type": "object",
            }
        },
        "properties": {
            "skill": {"title": "Skill", "type": "string"},
            "command": {"title": "Command", "type": "string"},
            "cwd": {"default": "", "title": "Cwd", "type": "string"},
            "env": {
                "additionalProperties": {"type": "string"},
                "default": {},
                "title": "Env",
                "type": "object",
            },
            "output_files": {
                "default": [],
                "items": {"type": "string"},
                "title": "Output Files",
                "type": "array",
            },
            "timeout": {"default": 0, "title": "Timeout", "type": "integer"},
            "inputs": {
                "default": [],
                "items": {"$ref": "#/$defs/WorkspaceInputSpec"},
                "title": "Inputs",
                "type": "array",
            },
            "save_as_artifacts": {
                "default": False,
                "title": "Save As Artifacts",
                "type": "boolean",
            },
        },
        "required": ["skill", "command"],
        "title": "SkillRunInput",
        "type": "object",
    },
}


async def _within_quota(ctx: ToolContext, copy: Callable[..., _T], *args: Any) -> _T:
    """Run a copy of files into the workspace (`stage_inputs`, `save_artifacts`) under the
    person's storage quota, as every other write of a tool: room reserved first, the copy
    refused past it (`limit`), the workspace measured after."""
    ws = ctx.workspace
    if ctx.storage is None:
        return await asyncio.to_thread(copy, ws, *args)
    allowance = await ctx.storage.reserve(ws)
    try:
        return await asyncio.to_thread(functools.partial(copy, limit=allowance.bytes), ws, *args)
    finally:
        await asyncio.shield(ctx.storage.settle(ws, allowance))


async def run_skill_command(
    session: SkillSession, tool_use_id: str, name: str, tool_input: dict[str, Any]
) -> ToolAnswer:
    """Run one `skill_run` call and answer it: the skill (loaded or not) is staged as needed."""
    command = str(tool_input.get("command") or "").strip()
    if not command:
        return error_answer(tool_use_id, "command is empty.", skill=name)
    try:
        # An allow-list of plain names: nothing that makes bash or an interpreter load code.
        env = skill_run_env(tool_input.get("env"))
    except ToolError as exc:
        return error_answer(tool_use_id, str(exc), skill=name)
    design = session.config.design
    # A skill's files enter the workspace only when the rules let this conversation use it:
    # decided first, so no one is asked about a command of a skill they may not use.
    for used in dict.fromkeys([name, *skill_names(tool_input.get("inputs"))]):
        refused = await _refusal(session, used)
        if refused is not None:
            message = (
                f"skill://{used}: the rules do not let this conversation use the skill "
                f'"{used}" ({refused.reason}); its files are not copied.'
                if used != name
                else f'the skill "{name}" may not be used here ({refused.reason}).'
            )
            return error_answer(tool_use_id, message, skill=name, denied=True)
    # skill_run commands are governed by the Bash rules, with the environment in plain sight.
    decision = await session.decide(
        ToolCall(tool="Bash", input={"command": command_with_env(env, command)}),
        allow_by_default=design,
    )
    if decision.behavior != "allow":
        message = f"Permission denied: {decision.reason}"
        return error_answer(tool_use_id, message, skill=name, denied=True)
    ctx = session.tool_context()
    workspace = ctx.workspace
    try:
        skill_dir = Path(await session.stage_skill(name))
        # File work off the event loop: other runs of this process keep streaming meanwhile.
        if tool_input.get("inputs") not in (None, []):
            await _within_quota(ctx, stage_inputs, tool_input.get("inputs"), session.skills)
        run_dir = workspace.new_run_dir()
        variables = {
            "WORKSPACE_DIR": str(workspace.root),
            "SKILLS_DIR": str(workspace.skills_dir),
            "WORK_DIR": str(workspace.work_dir),
            "OUTPUT_DIR": str(workspace.out_dir),
            "RUN_DIR": str(run_dir),
            "SKILL_NAME": name,
        }
        cwd = resolve_cwd(workspace, skill_dir, tool_input.get("cwd"), variables)
        err_file = workspace.ensure_tmp() / f"stderr-{uuid.uuid4().hex}"
        out_file = workspace.ensure_tmp() / f"stdout-{uuid.uuid4().hex}"
    except (ToolError, OSError) as exc:
        return error_answer(tool_use_id, str(exc), skill=name)
    # The design's `bash -lc` is a login shell inside the sandboxed one (its profile files
    # too), and its stdout is the program's as written (the Bash tool trims its last newline).
    program = f"bash -lc {shlex.quote(command)}" if design else command
    streams = f"2> {shlex.quote(str(err_file))}"
    if design:
        streams = f"> {shlex.quote(str(out_file))} {streams}"
    wrapped = f"cd {shlex.quote(str(cwd))} && ( {program}\n) {streams}"
    run_input: dict[str, Any] = {"command": wrapped}
    if tool_input.get("timeout"):
        run_input["timeout"] = tool_input["timeout"]
    server_env = {**variables, "SKILL_DIR": str(skill_dir)}
    run_ctx = replace(ctx, env={**ctx.env, **env, **server_env})
    started = time.monotonic()
    try:
        result = await BashTool().run(run_input, run_ctx)
    except ToolError as exc:  # e.g. no sandbox and no permission to run without one
        return error_answer(tool_use_id, str(exc), skill=name)
    duration_ms = int((time.monotonic() - started) * 1000)
    stderr = _read_back(workspace, err_file, ctx.output_limit)
    stdout, exit_code, timed_out = _split_status(result.content)
    if design:
        stdout = _read_back(workspace, out_file, ctx.output_limit)
    # Bounded, linear and cancellable: Stop ends the walk, not only the wait for it.
    budget = Budget(entries=MAX_WALKED)
    files, note = await run_cancellable(
        lambda: collect_outputs(
            workspace, tool_input.get("output_files"), variables, budget=budget
        ),
        budget,
    )
    payload: dict[str, Any] = {
        "stdout": stdout,
        "stderr": stderr,
        "exit_code": exit_code,
        "timed_out": timed_out,
        "duration_ms": duration_ms,
        "output_files": files,
    }
    if note:
        payload["output_files_note"] = note
    artifacts = set(result.artifacts)
    if tool_input.get("save_as_artifacts") is True and files:
        try:
            saved = await _within_quota(ctx, save_artifacts, files)
        except (ToolError, OSError) as exc:
            return error_answer(tool_use_id, f"could not save the output files: {exc}", skill=name)
        if not design:  # Skillscope's addition: which downloads the files became
            payload["artifact_files"] = saved
        artifacts.update(saved)
    if design:
        record = {"skill": name, "command": command, "cwd": workspace.relative(cwd), **payload}
        await asyncio.to_thread(_write_record, workspace, run_dir, record)
    block = tool_result_block(
        tool_use_id, json.dumps(payload, ensure_ascii=False), is_error=result.is_error
    )
    return ToolAnswer(block, skill=name, artifacts=tuple(sorted(artifacts)))


def _write_record(workspace: Workspace, run_dir: Path, record: dict[str, Any]) -> None:
    """The run's record in its folder, written without following a link the command planted."""
    try:
        fd = workspace.open_file(run_dir / "record.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except (WorkspaceError, OSError):
        return  # the command put something there first: its run folder, its choice
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(record, handle, ensure_ascii=False, indent=2)


async def _refusal(session: SkillSession, name: str) -> Decision | None:
    """Why the conversation may not use this skill's files now, or None when it may.

    A skill loaded in this turn and still listed was allowed when it was loaded and no deny
    rule has removed it from the listing since: no second question. Any other skill is decided
    as a use of it, `Skill(NAME)`: deny refuses, ask asks the user, allow lets it through. A skill
    that is not offered here (another user's, filtered out) is refused by `stage_inputs`.
    """
    spec = session.skills.get(name)
    if spec is None:
        return None  # not offered: reading it fails with its own message
    listed = any(s.name == name for s in session.skills.skills())
    loaded = name in skill_state(session.history, session.config.skill_state).loaded
    if listed and loaded:
        return None
    if not spec.model_invocable and not loaded:
        return Decision("deny", "the skill is for people to start, not the model", None)
    # As the source design, using a skill asks no one (its skill_run takes any skill of its
    # repository); deny and ask rules on Skill(NAME) still decide.
    decision = await session.decide(
        ToolCall(tool="Skill", input={"skill": name}), allow_by_default=session.config.design
    )
    return None if decision.behavior == "allow" else decision


def resolve_cwd(
    workspace: Workspace, skill_dir: Path, raw: object, variables: dict[str, str]
) -> Path:
    """The command's folder: the staged skill's, or `cwd` relative to it (inside the workspace)."""
    if raw is not None and not isinstance(raw, str):
        raise ToolError("skill_run: cwd must be a path relative to the skill's folder.")
    text = expand((raw or "").strip(), variables)
    if not text:
        return skill_dir
    path = text if text.startswith("/") else str(skill_dir / text)
    resolved = workspace.resolve(path)
    if not resolved.is_dir():
        raise ToolError(f"skill_run: cwd {raw!r} is not a folder of the workspace.")
    return resolved


def _split_status(content: str) -> tuple[str, int | None, bool]:
    """stdout, exit code and timeout from the Bash tool's result (its last paragraph)."""
    stdout, sep, status = content.rpartition("\n\n")
    if not sep:
        stdout, status = "", content
    if status.startswith("Command timed out"):
        return stdout, None, True
    if status.startswith("Exit code: "):
        try:
            return stdout, int(status.removeprefix("Exit code: ").split()[0]), False
        except ValueError:
            return stdout, None, False
    return content, None, False


def _read_back(workspace: Workspace, path: Path, limit: int) -> str:
    """The tail of the command's stderr file, opened without following a link the command may
    have put in its place; the file is removed either way."""
    try:
        fd = workspace.open_file(path, os.O_RDONLY)
    except (WorkspaceError, OSError):
        text = ""
    else:
        with os.fdopen(fd, "rb") as handle:
            # Only the tail is kept: never read a huge file whole.
            size = os.fstat(handle.fileno()).st_size
            handle.seek(max(0, size - limit * 4))
            text = handle.read().decode("utf-8", errors="replace")
    with contextlib.suppress(OSError):
        path.unlink()
    return text[-limit:]
