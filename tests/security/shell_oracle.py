"""Bash as the judge of the rule engine: run a command for real and record every program it starts.

The command runs with the real bash inside the project's bubblewrap sandbox (`base_argv`, the
options every Bash call gets), with the host's programs taken away: `/usr/bin`, `/usr/sbin` and
`/usr/local` are empty tmpfs mounts (and `/bin`, `/sbin` are links into them), so `/bin/rm`,
`/usr/bin/rm`, `command -p rm` and `env rm` can only reach what is put back. Put back are:

- recording shims, one per name in SHIMS: a bash script that appends its own name and arguments
  to a log and exits 0. The name comes from the path the kernel ran (`$0`), so `exec -a other rm`
  and `hash -p /usr/bin/rm ls` are still recorded as `rm`;
- the real shell and the real command runners (RUNNERS: `env`, `timeout`, `xargs`, `find`...),
  so that a denied program they start is really started, and recorded by its shim.

Nothing else of the host is executable on the PATH. The log lives outside the workspace, in a
folder the command is not told about.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from skills_app.core.tools.sandbox import base_argv

# Programs that only record that they ran (external twins of builtins included: `/bin/echo`).
SHIMS = (
    "rm", "touch", "echo", "printf", "cat", "ls", "id", "true", "false", "test", "[", "kill",
    "unlink", "rmdir", "mv", "cp", "mkdir", "chmod", "ln", "sleep", "date", "wc", "grep", "head",
    "tail", "tee", "sed", "awk", "python3", "perl", "whoami", "printenv", "seq", "sort", "tr",
    "yes", "dd", "shred", "truncate", "install", "git", "curl", "sudo", "doas", "su", "busybox",
)  # fmt: skip
# Real programs, so that what they run is really run: the shells and the command runners.
RUNNERS = (
    "bash", "sh", "dash", "env", "nice", "nohup", "timeout", "xargs", "find", "stdbuf", "setsid",
    "flock", "script",
)  # fmt: skip
_SHIM_TEXT = """#!{bash}
printf '%s\\037' "${{0##*/}}" "$@" >> {log}
printf '\\036' >> {log}
exit 0
"""


@dataclass(frozen=True, slots=True)
class Ran:
    """What one command started: each program's name and arguments, in order."""

    calls: tuple[tuple[str, ...], ...]
    output: str

    def programs(self) -> set[str]:
        """The names of the programs started."""
        return {call[0] for call in self.calls}


def available() -> str:
    """Why the oracle cannot run here, or "" when it can."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "needs bubblewrap"
    try:
        done = subprocess.run(
            [*base_argv(bwrap), "true"], capture_output=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap does not start ({exc})"
    return "" if done.returncode == 0 else "bubblewrap does not work here"


class Oracle:
    """Runs commands with bash in a sandbox whose PATH records every program started."""

    def __init__(self, base: Path) -> None:
        bwrap = shutil.which("bwrap")
        assert bwrap is not None
        self.base = base
        self.workspace = base / "ws"
        self.logdir = base / f"log-{uuid.uuid4().hex}"
        self.logdir.mkdir(parents=True)
        self.log = self.logdir / "calls"
        real_bash = os.path.realpath(shutil.which("bash") or "/bin/bash")
        self.shim = base / "shim"
        self.shim.write_text(_SHIM_TEXT.format(bash="/oracle/bash", log=self.log))
        self.shim.chmod(0o755)
        argv = base_argv(bwrap)
        # Take the host's programs away, then put back the shims and the real runners.
        argv += ["--tmpfs", "/usr/bin", "--tmpfs", "/usr/sbin", "--tmpfs", "/usr/local"]
        argv += ["--ro-bind", real_bash, "/oracle/bash"]
        for name in RUNNERS:
            real = shutil.which(name, path="/usr/bin:/bin")
            if real is not None:
                argv += ["--ro-bind", os.path.realpath(real), f"/usr/bin/{name}"]
        for name in SHIMS:
            argv += ["--ro-bind", str(self.shim), f"/usr/bin/{name}"]
        self.argv = argv

    def run(self, command: str, timeout: float = 10.0) -> Ran:
        """Run `bash -c command` in a fresh workspace; what it started, and its output."""
        if self.workspace.exists():
            shutil.rmtree(self.workspace)
        for sub in ("work", "out", "skills"):
            (self.workspace / sub).mkdir(parents=True)
        (self.workspace / "work" / "t").write_text("target\n")
        self.log.write_bytes(b"")
        ws = str(self.workspace)
        argv = [*self.argv, "--bind", ws, ws, "--bind", str(self.logdir), str(self.logdir)]
        argv += ["--chdir", ws, "/usr/bin/bash", "-c", command]
        env = {
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": ws,
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "TERM": "dumb",
            "WORK_DIR": f"{ws}/work",
            "OUTPUT_DIR": f"{ws}/out",
            "SKILLS_DIR": f"{ws}/skills",
        }
        try:
            done = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout,
                env=env,
                check=False,
            )
            output = (done.stdout + done.stderr).decode("utf-8", "replace")
        except subprocess.TimeoutExpired:
            output = "(timed out)"
        raw = self.log.read_bytes().decode("utf-8", "replace")
        calls = tuple(
            tuple(record.rstrip("\x1f").split("\x1f")) for record in raw.split("\x1e") if record
        )
        return Ran(calls, output)
