"""Bash: run a shell command in the workspace with a scrubbed environment and resource limits.

Containment, in layers:

- The child starts in its own session (`start_new_session=True`), so it has no controlling
  terminal and the whole process group can be killed: on timeout, and also when the command
  finishes (background jobs do not outlive the call).
- stdin is /dev/null; stdout and stderr are merged and capped (head and tail kept).
- The environment starts empty: a fixed PATH, HOME=<workspace root>, C.UTF-8 locale, TERM=dumb,
  TMPDIR=<root>/work/.tmp, WORK_DIR/OUTPUT_DIR/SKILLS_DIR and the context's extra env. No
  variable of the server process (API keys, SECRET_KEY, DATABASE_URL...) is passed on.
- rlimits set in the child: CPU seconds, address space, file size, process count, no core dumps.
  RLIMIT_NPROC is not enforced for uid 0, so when the server runs as root a fork bomb is held
  only by the timeout and the process-group kill (and, with bwrap, by the PID namespace whose
  init takes every process with it). Run the server as an unprivileged user in production.
- SANDBOX=bwrap wraps the command in bubblewrap: no network, new PID/IPC/UTS namespaces, all
  capabilities dropped (as root they would otherwise allow remounting the read-only binds), a
  read-only /usr and a few /etc files, the workspace bound writable at its own path, and skills/
  bound read-only on top of it. Under SANDBOX=none staged skills rely on file modes, which root
  ignores (see workspace.py).
"""

from __future__ import annotations

import asyncio
import os
import resource
import shutil
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skills_app.core.tools.base import ToolContext, ToolError, ToolResult, str_arg
from skills_app.core.tools.workspace import Workspace

SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_READ_CHUNK = 64 * 1024
_DRAIN_SECONDS = 2.0
_SANDBOXES = ("none", "bwrap")
# /etc entries a normal userland needs; the rest of /etc (shadow, ssh keys...) stays out.
_ETC_ENTRIES = (
    "alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "passwd", "group",
    "nsswitch.conf", "localtime", "timezone", "ssl", "ca-certificates", "fonts", "mime.types",
    "magic", "ImageMagick-6", "ImageMagick-7", "os-release", "debian_version", "hosts",
    "bash.bashrc", "profile", "inputrc", "python3", "python3.11", "pki", "crypto-policies",
)  # fmt: skip
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


def build_env(ws: Workspace, extra: Mapping[str, str]) -> dict[str, str]:
    """The complete environment of a Bash command: an allow-list, never the server's own env."""
    env = {
        "PATH": SAFE_PATH,
        "HOME": str(ws.root),
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
    for key, value in extra.items():
        if not key or "=" in key or "\x00" in key or "\x00" in str(value):
            raise ToolError(f"Bash: invalid environment variable name or value for {key!r}.")
        env[key] = str(value)
    return env


def bwrap_argv(ws: Workspace, command: str) -> list[str]:
    """The bubblewrap command line that runs `bash -c command` sandboxed in the workspace."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise ToolError(
            "Bash: SANDBOX=bwrap but bubblewrap is not installed. Install it "
            "(`apt-get install bubblewrap`) or set SANDBOX=none."
        )
    argv = [bwrap, "--unshare-all", "--die-with-parent", "--cap-drop", "ALL"]
    argv += ["--ro-bind", "/usr", "/usr"]
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = Path("/") / top
        if host.is_symlink():
            argv += ["--symlink", os.readlink(host), str(host)]
        elif host.is_dir():
            argv += ["--ro-bind", str(host), str(host)]
    for entry in _ETC_ENTRIES:
        argv += ["--ro-bind-try", f"/etc/{entry}", f"/etc/{entry}"]
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    # Same absolute path inside and out, so paths in tool results and ${CLAUDE_SKILL_DIR} agree.
    root, skills = str(ws.root), str(ws.skills_dir)
    argv += ["--bind", root, root, "--ro-bind", skills, skills, "--chdir", root]
    return [*argv, "bash", "-c", command]


def _limiter(limits: BashLimits, cpu_seconds: int) -> Callable[[], None]:
    def apply() -> None:  # runs in the child between fork and exec
        for kind, value in (
            (resource.RLIMIT_CPU, cpu_seconds),
            (resource.RLIMIT_AS, limits.address_space_bytes),
            (resource.RLIMIT_FSIZE, limits.file_size_bytes),
            (resource.RLIMIT_NPROC, limits.processes),
            (resource.RLIMIT_CORE, 0),
        ):
            _soft, hard = resource.getrlimit(kind)
            # Never try to raise past an existing hard limit: that fails for non-root users.
            soft = value if hard == resource.RLIM_INFINITY else min(value, hard)
            # CPU: SIGXCPU at the soft limit says why; the hard limit (SIGKILL) is one second later.
            top = soft + 1 if kind == resource.RLIMIT_CPU else soft
            resource.setrlimit(
                kind, (soft, top if hard == resource.RLIM_INFINITY else min(top, hard))
            )

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


async def _exited_within(proc: asyncio.subprocess.Process, timeout: float) -> bool:
    """Wait for the main process itself to exit; False on timeout."""
    # Not proc.wait(): on Python 3.11 that also waits for the pipes to close, which a
    # background job (`sleep 100 &`) would hold open until the timeout.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    delay = 0.002
    while proc.returncode is None:
        remaining = deadline - loop.time()
        if remaining <= 0:
            return False
        await asyncio.sleep(min(delay, remaining))
        delay = min(delay * 2, 0.05)
    return True


async def _pump(stream: asyncio.StreamReader, sink: _CappedOutput) -> None:
    while chunk := await stream.read(_READ_CHUNK):
        sink.feed(chunk)


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
            "command": {"type": "string", "description": "The command to run with bash -c."},
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
        value = input.get("timeout")
        if value is None:
            return float(min(ctx.bash_timeout_default, ctx.bash_timeout_max))
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise ToolError(f"Bash: timeout must be a positive number of seconds, got {value!r}.")
        return float(min(value, ctx.bash_timeout_max))

    async def run(self, input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        """Run the command and report its output, exit status and new files under out/."""
        command = str_arg(self.name, input, "command")
        timeout = self._timeout(input, ctx)
        if ctx.sandbox not in _SANDBOXES:
            raise ToolError(
                f"Bash: unknown sandbox {ctx.sandbox!r}; use one of {', '.join(_SANDBOXES)}."
            )
        ws = ctx.workspace
        argv = bwrap_argv(ws, command) if ctx.sandbox == "bwrap" else ["bash", "-c", command]
        env = build_env(ws, ctx.env)
        (ws.work_dir / ".tmp").mkdir(exist_ok=True)
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
                preexec_fn=_limiter(self.limits, cpu),
            )
        except OSError as exc:
            raise ToolError(f"Bash: could not start the command: {exc}.") from exc

        output = _CappedOutput(ctx.output_limit)
        assert proc.stdout is not None
        pump = asyncio.create_task(_pump(proc.stdout, output))
        try:
            timed_out = not await _exited_within(proc, timeout)
        finally:
            # Also on success: background jobs must not outlive the call (or hold the pipe open).
            kill_group(proc.pid)
        try:
            await asyncio.wait_for(asyncio.shield(pump), _DRAIN_SECONDS)
            await asyncio.wait_for(proc.wait(), _DRAIN_SECONDS)
        except TimeoutError:
            pump.cancel()  # a process that left our session holds the pipe; keep what we have

        after = ws.snapshot_out()
        artifacts = tuple(sorted(p for p, stamp in after.items() if before.get(p) != stamp))
        text = output.text().rstrip("\n")
        status = self._status(proc.returncode, timed_out, timeout)
        content = f"{text}\n\n{status}" if text else status
        return ToolResult(content, is_error=timed_out or proc.returncode != 0, artifacts=artifacts)

    def _status(self, code: int | None, timed_out: bool, timeout: float) -> str:
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
                hint_text += f" ({self.limits.file_size_bytes} bytes per file)"
            return f"Exit code: {code} (signal {name}{hint_text})"
        return f"Exit code: {code}"
