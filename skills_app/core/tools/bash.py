"""Bash: run a shell command in the workspace with a scrubbed environment and resource limits.

Containment, in layers:

- Sandbox (see `sandbox`): SANDBOX=auto runs the command in bubblewrap when it works here, and
  otherwise without a sandbox; without one, the command is refused unless the context says the
  user holds the "run unsandboxed commands" permission (`ToolContext.unsandboxed_allowed`).
- No process outlives the call. In bubblewrap the command is in its own PID namespace: when it
  ends, or bwrap is killed, the kernel kills every process in it (setsid, nohup and double forks
  included). Without a sandbox the command runs under `reaper`, a child subreaper that keeps
  every orphan as its descendant and kills them all when the command ends or on a timeout.
- Server restarts: the direct child gets a parent-death signal (PR_SET_PDEATHSIG), SIGKILL for
  bwrap (whose --die-with-parent then empties the namespace), SIGTERM for the reaper (which then
  kills the tree). Limits: the signal fires when the forking *thread* exits, so the run's event
  loop must outlive its commands (it does: the call is awaited); a setuid bwrap would drop it.
- stdin is /dev/null; stdout and stderr are merged and capped (head and tail kept).
- The environment starts empty: a fixed PATH, C.UTF-8 locale, TERM=dumb,
  TMPDIR=<root>/work/.tmp, WORK_DIR/OUTPUT_DIR/SKILLS_DIR and the context's extra env, whose
  names must pass `env.env_name_problem` (no BASH_ENV, LD_*, PYTHON*...). No variable of the
  server process (API keys, SECRET_KEY, DATABASE_URL...) is passed on.
- $HOME is a fresh, empty folder outside the workspace for every command (in bubblewrap, in the
  command's own /tmp; without a sandbox, a temporary folder removed afterwards), and
  `env.program_switches` turns off what git, Python, less, node, npm and pip would otherwise
  read from the workspace as code or configuration: an allowed program runs what it was allowed
  to, not what the model wrote beside it.
- Without a sandbox a root server's commands run with every capability dropped (`caps`), so
  staged skills, which belong to another uid, stay read-only for them. RLIMIT_NPROC is then left
  as it was: without capabilities it would count every root process of the host.
- rlimits set in the child: CPU seconds, address space, file size, process count, no core dumps.
  RLIMIT_NPROC is not enforced for uid 0, so when the server runs as root a fork bomb is held
  only by the timeout and the kill (and, with bwrap, by the PID namespace). Run the server as an
  unprivileged user in production.
- Before each command the workspace layout is repaired without following links (a `work/` or
  `out/` that a previous command replaced by a symlink is removed, never followed).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import resource
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from skills_app.core.tools import caps, reaper
from skills_app.core.tools.base import ToolContext, ToolError, ToolResult
from skills_app.core.tools.env import check_extra_env, program_switches
from skills_app.core.tools.inputs import check_input
from skills_app.core.tools.sandbox import (
    INSTALL_HINT,
    SandboxStatus,
    bwrap_argv,
    check_mode,
    describe_sandbox,
    refusal,
)
from skills_app.core.tools.storage import WATCH_SECONDS, Allowance, human, workspace_bytes
from skills_app.core.tools.workspace import Workspace

SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_READ_CHUNK = 64 * 1024
_DRAIN_SECONDS = 2.0
# How long the reaper gets to kill the command's tree after SIGTERM before it is SIGKILLed.
_REAPER_GRACE_SECONDS = 6.0
_REAPER = str(Path(reaper.__file__).resolve())
# Loaded once here: calling dlopen between fork and exec could deadlock.
_LIBC = ctypes.CDLL(None, use_errno=True)
_SIGNAL_HINTS = {
    signal.SIGXFSZ: "file size limit exceeded",
    signal.SIGXCPU: "CPU time limit exceeded",
    signal.SIGKILL: "killed",
    signal.SIGSEGV: "segmentation fault (possibly the memory limit)",
}


@dataclass(frozen=True, slots=True)
class BashLimits:
    """Per-command resource limits applied with setrlimit in the child."""

    cpu_seconds: int = 600
    address_space_bytes: int = 1024**3
    file_size_bytes: int = 100 * 1024**2
    processes: int = 256


# $HOME inside bubblewrap: a folder in the command's own /tmp (a fresh tmpfs, sized, gone
# when the command ends), so nothing in the workspace is read as a start-up or config file.
SANDBOX_HOME = "/tmp/home"


def build_env(ws: Workspace, extra: Mapping[str, str], home: str = SANDBOX_HOME) -> dict[str, str]:
    """The complete environment of a Bash command: an allow-list, never the server's own env."""
    env = {
        "PATH": SAFE_PATH,
        **program_switches(home),
        "PWD": str(ws.root),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "TMPDIR": str(ws.work_dir / ".tmp"),
        "WORK_DIR": str(ws.work_dir),
        "OUTPUT_DIR": str(ws.out_dir),
        "SKILLS_DIR": str(ws.skills_dir),
        # Staged skills are read-only; don't let Python try to write __pycache__ into them.
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.update(check_extra_env(extra))
    return env


@contextlib.contextmanager
def _command_home(sandboxed: bool) -> Iterator[str]:
    """A command's $HOME: in bubblewrap, SANDBOX_HOME in its own /tmp; without a sandbox, a
    fresh folder of the host's temporary space, removed afterwards."""
    if sandboxed:
        yield SANDBOX_HOME
        return
    home = tempfile.mkdtemp(prefix="skillscope-home-")
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _child_setup(
    limits: BashLimits,
    cpu_seconds: int,
    death_signal: int,
    server_pid: int,
    drop_caps_to: int | None = None,
) -> Callable[[], None]:
    def apply() -> None:  # runs in the child between fork and exec
        # Die (bwrap) or clean up (reaper) when the server process goes away, so no command
        # outlives a restart; if it already went away during the fork, stop here.
        _LIBC.prctl(reaper.PR_SET_PDEATHSIG, death_signal, 0, 0, 0)
        if os.getppid() != server_pid:
            os._exit(1)
        rlimits = [
            (resource.RLIMIT_CPU, cpu_seconds),
            (resource.RLIMIT_AS, limits.address_space_bytes),
            (resource.RLIMIT_FSIZE, limits.file_size_bytes),
            (resource.RLIMIT_CORE, 0),
        ]
        if drop_caps_to is None:
            # Uid 0 without capabilities would be held to it counted over every root process of
            # the host (no fork at all on a busy machine); root's commands never were.
            rlimits.append((resource.RLIMIT_NPROC, limits.processes))
        for kind, value in rlimits:
            _soft, hard = resource.getrlimit(kind)
            # Never try to raise past an existing hard limit: that fails for non-root users.
            soft = value if hard == resource.RLIM_INFINITY else min(value, hard)
            # CPU: SIGXCPU at the soft limit says why; the hard limit (SIGKILL) is one second later.
            top = soft + 1 if kind == resource.RLIMIT_CPU else soft
            resource.setrlimit(
                kind, (soft, top if hard == resource.RLIM_INFINITY else min(top, hard))
            )
        if drop_caps_to is not None:
            caps.drop_all(drop_caps_to)  # last: the steps above may still need them

    return apply


def kill_group(pgid: int) -> None:
    """SIGKILL every process in a process group."""
    # The kernel makes a fork that races a group kill fail, so one signal reaches every member;
    # a few repeats are cheap insurance. Killed members linger as zombies until reaped, so
    # "the group still exists" cannot be the loop condition.
    for _ in range(3):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.005)


def _close(*fds: int) -> None:
    for fd in fds:
        if fd >= 0:
            os.close(fd)


def _kill_reported_group(report: int) -> None:
    """SIGKILL the process group the reaper reported on `report`, if it did already."""
    if report < 0:
        return
    os.set_blocking(report, False)
    try:
        text = os.read(report, 64).decode("ascii", "replace").strip()
    except OSError:
        return  # nothing written yet: the reaper alone cleans up
    if text.isdigit() and int(text) > 1:
        kill_group(int(text))


class _CappedOutput:
    """Keeps the first and last `limit/2` bytes of a stream and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.half = max(limit // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        cut = self.total - len(self.head) - len(self.tail)
        if cut <= 0:
            return head + tail
        return f"{head}\n\n[... {cut} bytes of output cut ...]\n\n{tail}"


async def _exited_within(
    proc: asyncio.subprocess.Process, timeout: float, stop: asyncio.Event | None = None
) -> bool:
    """Wait for the main process itself to exit; False on timeout (or when `stop` is set)."""
    # Not proc.wait(): on Python 3.11 that also waits for the pipes to close, which a
    # background job (`sleep 100 &`) would hold open until the timeout.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    delay = 0.002
    while proc.returncode is None:
        remaining = deadline - loop.time()
        if remaining <= 0 or (stop is not None and stop.is_set()):
            return False
        await asyncio.sleep(min(delay, remaining))
        delay = min(delay * 2, 0.05)
    return True


async def _pump(stream: asyncio.StreamReader, sink: _CappedOutput) -> None:
    while chunk := await stream.read(_READ_CHUNK):
        sink.feed(chunk)


_FREE_SPACE = (
    "Free space by removing files you no longer need (from work/ or out/, e.g. with rm) or by "
    "deleting old conversations; an administrator can raise your quota."
)


async def _watch_storage(ws: Workspace, allowance: Allowance, over: asyncio.Event) -> None:
    """Set `over` once the workspace has grown past the call's allowance."""
    while True:
        await asyncio.sleep(WATCH_SECONDS)
        held = await asyncio.to_thread(workspace_bytes, ws)
        if held - allowance.before > allowance.bytes:
            over.set()
            return


class BashTool:
    name = "Bash"
    description = (
        "Run a bash command in the workspace root (cwd), e.g. `python3 skills/pdf/scripts/x.py "
        "work/in.pdf`. $WORK_DIR is scratch space, $OUTPUT_DIR (out/) holds files for the user, "
        "$SKILLS_DIR holds read-only staged skills, $SKILL_DIR the active skill. stdin is empty "
        "(commands cannot prompt), stdout and stderr are merged, long output keeps its start and "
        "end. timeout is in seconds. No network when sandboxed. Background processes are stopped "
        "when the command ends. Prefer Read/Write/Edit/Glob/Grep for file work."
    )
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "command": {
                "type": "string",
                "minLength": 1,
                "description": "The command to run with bash -c.",
            },
            "timeout": {
                "type": "number",
                "exclusiveMinimum": 0,
                "description": "Timeout in seconds (default 120, capped by the server).",
            },
            "description": {
                "type": "string",
                "description": "A few words on what the command does, shown to the user.",
            },
        },
        "required": ["command"],
        "additionalProperties": False,
    }

    def __init__(self, limits: BashLimits | None = None) -> None:
        self.limits = limits or BashLimits()

    def _timeout(self, input: Mapping[str, Any], ctx: ToolContext) -> float:
        # The schema has already checked that a given timeout is a positive number.
        value = input.get("timeout")
        if value is None:
            return float(min(ctx.bash_timeout_default, ctx.bash_timeout_max))
        return float(min(value, ctx.bash_timeout_max))

    async def run(self, input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        """Run the command and report its output, exit status and new files under out/."""
        check_input(self.name, self.input_schema, input)
        command: str = input["command"]
        timeout = self._timeout(input, ctx)
        sandbox = describe_sandbox(check_mode(ctx.sandbox))
        if not sandbox.sandboxed and not ctx.unsandboxed_allowed:
            raise ToolError(refusal(sandbox, self.name))
        ws = ctx.workspace
        build_env(ws, ctx.env)  # a bad extra variable is refused before anything is reserved
        ws.ensure_layout()  # a previous command may have replaced work/ or out/ with a link
        ws.ensure_tmp()
        with _command_home(sandbox.sandboxed) as home:
            if ctx.storage is None:
                return await self._run(command, timeout, sandbox, ctx, None, home)
            allowance = await ctx.storage.reserve(ws)
            try:
                return await self._run(command, timeout, sandbox, ctx, allowance, home)
            finally:
                # Measured and given back even when the run is cancelled mid-command.
                await asyncio.shield(ctx.storage.settle(ws, allowance))

    async def _run(
        self,
        command: str,
        timeout: float,
        sandbox: SandboxStatus,
        ctx: ToolContext,
        allowance: Allowance | None,
        home: str,
    ) -> ToolResult:
        ws = ctx.workspace
        env = build_env(ws, ctx.env, home)
        limits = self.limits
        if allowance is not None:
            # No single file may grow past what the person has left (0: no file grows at all,
            # while rm and reading still work, so space can be freed).
            limits = replace(limits, file_size_bytes=min(limits.file_size_bytes, allowance.bytes))
        report = report_w = -1
        drop_caps_to: int | None = None
        if not sandbox.sandboxed and caps.needed():
            if not caps.can_drop():
                raise ToolError(
                    "Bash: the server runs as root without a sandbox and cannot drop the "
                    "capabilities of commands (it lacks CAP_SETPCAP), so they could change "
                    f"read-only skill files. {INSTALL_HINT.capitalize()} and set SANDBOX=auto, "
                    "or run the server as an unprivileged user."
                )
            drop_caps_to = caps.last_cap()
        if sandbox.sandboxed:
            argv = bwrap_argv(
                ws.root,
                ws.skills_dir,
                command,
                hidden_paths=tuple(ctx.sandbox_hidden_paths),
                tmp_bytes=allowance.bytes if allowance is not None else None,
                home=home,
            )
            death = signal.SIGKILL  # bwrap's --die-with-parent then empties the namespace
        else:
            # -I: the reaper ignores PYTHON* variables and the user's site-packages. It reports
            # the command's process group on `report`, for a fast kill on timeout.
            report, report_w = os.pipe()
            argv = [sys.executable, "-I", "-S", _REAPER, "--report-fd", str(report_w)]
            argv += ["bash", "-c", command]
            death = signal.SIGTERM  # the reaper catches it and kills the whole tree
        cpu = min(self.limits.cpu_seconds, int(timeout) + 1)
        before = ws.snapshot_out()
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                cwd=ws.root,
                env=env,
                start_new_session=True,
                preexec_fn=_child_setup(limits, cpu, death, os.getpid(), drop_caps_to),
                pass_fds=(report_w,) if report_w >= 0 else (),
            )
        except OSError as exc:
            _close(report, report_w)
            raise ToolError(f"Bash: could not start the command: {exc}.") from exc
        _close(report_w)

        output = _CappedOutput(ctx.output_limit)
        assert proc.stdout is not None
        pump = asyncio.create_task(_pump(proc.stdout, output))
        over = asyncio.Event()
        watch = (
            asyncio.create_task(_watch_storage(ws, allowance, over))
            if allowance is not None
            else None
        )
        try:
            timed_out = not await _exited_within(proc, timeout, over)
        finally:
            if watch is not None:
                watch.cancel()
            # Also on success and on cancellation: nothing the command started may outlive it.
            if sandbox.sandboxed:
                kill_group(proc.pid)  # bwrap dies, and its PID namespace with it
            elif proc.returncode is None:
                # The command's own group at once (a fork bomb stops now), then the reaper
                # kills what left the group and exits.
                _kill_reported_group(report)
                proc.send_signal(signal.SIGTERM)
            _close(report)
        if not sandbox.sandboxed and not await _exited_within(proc, _REAPER_GRACE_SECONDS):
            kill_group(proc.pid)  # a reaper that did not finish: the last resort
        try:
            await asyncio.wait_for(asyncio.shield(pump), _DRAIN_SECONDS)
            await asyncio.wait_for(proc.wait(), _DRAIN_SECONDS)
        except TimeoutError:
            pump.cancel()  # a process that left our session holds the pipe; keep what we have

        after = ws.snapshot_out()
        artifacts = tuple(sorted(p for p, stamp in after.items() if before.get(p) != stamp))
        text = output.text().rstrip("\n")
        if over.is_set():
            assert allowance is not None
            status = (
                f"Stopped: the command wrote more than the {human(allowance.bytes)} this "
                "conversation's files could still take (the storage limit), and was killed with "
                f"every process it started. {allowance.notice or _FREE_SPACE}"
            )
            timed_out = False
        else:
            status = self._status(proc.returncode, timed_out, timeout, limits)
            if allowance is not None and allowance.notice:
                status = f"{status}\n{allowance.notice}"
        content = f"{text}\n\n{status}" if text else status
        failed = timed_out or over.is_set() or proc.returncode != 0
        return ToolResult(content, is_error=failed, artifacts=artifacts)

    def _status(self, code: int | None, timed_out: bool, timeout: float, limits: BashLimits) -> str:
        if timed_out:
            return (
                f"Command timed out after {timeout:g} seconds and was killed (with every process "
                "it started). Use a longer timeout or make the command finish sooner."
            )
        if code is None:
            return "Exit code: unknown"
        # A signal shows as -N when bash exec'd the program itself, as 128+N when it forked it.
        signum = -code if code < 0 else code - 128 if code > 128 else None
        if signum is not None:
            try:
                name = signal.Signals(signum).name
            except ValueError:
                return f"Exit code: {code}"
            hint = _SIGNAL_HINTS.get(signal.Signals(signum))
            hint_text = f", {hint}" if hint else ""
            if signal.Signals(signum) is signal.SIGXFSZ:
                hint_text += f" ({limits.file_size_bytes} bytes per file)"
            return f"Exit code: {code} (signal {name}{hint_text})"
        return f"Exit code: {code}"
