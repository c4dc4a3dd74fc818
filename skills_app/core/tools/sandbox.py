"""Where a command runs: the SANDBOX modes, the bubblewrap command line and the start-up summary.

Modes (the server's SANDBOX setting, copied into `ToolContext.sandbox`):

- ``auto`` (the default): bubblewrap when it is installed and works here (probed once per
  bwrap binary, then cached), otherwise no sandbox.
- ``bwrap``: always bubblewrap; a command fails with an install hint when it is missing.
- ``none``: no sandbox.

Without a sandbox a command can read everything the server can (its secret key, its database,
every workspace), so it runs only when the caller's context says the user holds the "run
unsandboxed commands" permission (`ToolContext.unsandboxed_allowed`); everyone else gets an
error saying what is wrong and what an administrator can do. This covers every way a command
runs: Bash, skill scripts (`skill_run`), `!` dynamic context and skill hooks all go through the
Bash tool.

What bubblewrap exposes (see `bwrap_argv`): /usr and the /bin, /lib... links read-only, a short
list of /etc files, a private /proc (new PID namespace), a minimal /dev, an empty /tmp, the
conversation's workspace writable at its own path and its skills/ read-only on top of it.
Nothing else of the host: not the server's project folder, var/, the database, the other
workspaces, nor /proc of the server. `hidden_paths` masks server paths that happen to lie inside
one of the read-only binds (e.g. a project installed under /usr/local).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from skills_app.core.tools.base import ToolError

MODES = ("auto", "bwrap", "none")
INSTALL_HINT = "install bubblewrap (`apt-get install bubblewrap`)"
PERMISSION_NAME = "run unsandboxed commands"
_PROBE_SECONDS = 10.0
# /etc entries a normal userland needs; the rest of /etc (shadow, ssh keys...) stays out.
_ETC_ENTRIES = (
    "alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "passwd", "group",
    "nsswitch.conf", "localtime", "timezone", "ssl", "ca-certificates", "fonts", "mime.types",
    "magic", "ImageMagick-6", "ImageMagick-7", "os-release", "debian_version", "hosts",
    "bash.bashrc", "profile", "inputrc", "python3", "python3.11", "pki", "crypto-policies",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class SandboxStatus:
    """The sandbox commands get under a configured mode, and why when it is not bubblewrap."""

    configured: str
    effective: str  # "bwrap" | "none"
    problem: str = ""  # why bubblewrap is not used; "" when it is

    @property
    def sandboxed(self) -> bool:
        """True when commands run inside bubblewrap."""
        return self.effective == "bwrap"

    def summary(self) -> str:
        """One sentence for the start-up log and the admin home."""
        if self.sandboxed:
            return f"Commands run sandboxed in bubblewrap (SANDBOX={self.configured})."
        return (
            f"Commands run WITHOUT a sandbox (SANDBOX={self.configured}: {self.problem}). Only "
            f'users with the "{PERMISSION_NAME}" permission may run commands; to sandbox them, '
            f"{INSTALL_HINT} and set SANDBOX=auto."
        )


def check_mode(mode: str) -> str:
    """The mode itself, or ToolError naming the valid ones."""
    if mode not in MODES:
        raise ToolError(f"Bash: unknown sandbox {mode!r}; use one of {', '.join(MODES)}.")
    return mode


def base_argv(bwrap: str, *, tmp_bytes: int | None = None) -> list[str]:
    """bubblewrap's options without the workspace: namespaces, read-only system, /proc, /dev."""
    # --unshare-all: no network, new PID/IPC/UTS/cgroup namespaces. --die-with-parent: the
    # sandbox dies with bwrap, and because the sandbox's init is PID 1 of its namespace the
    # kernel then kills every process in it (setsid, nohup and double forks included).
    # --cap-drop ALL: as root, capabilities would allow remounting the read-only binds.
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
    # /tmp is memory: sized (a call's storage allowance) so a command cannot fill the RAM there.
    size = ["--size", str(max(tmp_bytes, 1024 * 1024))] if tmp_bytes is not None else []
    return [*argv, "--proc", "/proc", "--dev", "/dev", *size, "--tmpfs", "/tmp"]


def _visible_under_binds(path: str) -> bool:
    return any(
        path == top or path.startswith(top + "/") for top in ("/usr", "/etc", "/bin", "/lib")
    )


def bwrap_argv(
    root: Path,
    skills_dir: Path,
    command: str,
    *,
    hidden_paths: tuple[str, ...] = (),
    tmp_bytes: int | None = None,
    home: str | None = None,
) -> list[str]:
    """The bubblewrap command line that runs `bash -c command` sandboxed in a workspace.

    `home`, a folder under /tmp, is created empty in the command's own /tmp for its $HOME.
    """
    prefix = workspace_prefix(
        root, skills_dir, hidden_paths=hidden_paths, tmp_bytes=tmp_bytes, home=home
    )
    return [*prefix, "bash", "-c", command]


def workspace_prefix(
    root: Path,
    skills_dir: Path,
    *,
    hidden_paths: tuple[str, ...] = (),
    tmp_bytes: int | None = None,
    home: str | None = None,
    read_only: tuple[str, ...] = (),
) -> list[str]:
    """bubblewrap's command line up to the program: the sandbox of a workspace, in its root.

    `read_only` host folders are bound read-only at their own path, before the workspace (an MCP
    server's installation, for instance); the program to run follows the returned list.
    """
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise ToolError(
            f"Bash: SANDBOX=bwrap but bubblewrap is not installed. {INSTALL_HINT.capitalize()}, "
            "or set SANDBOX=none (commands then run unsandboxed, and only for users with the "
            f'"{PERMISSION_NAME}" permission).'
        )
    argv = base_argv(bwrap, tmp_bytes=tmp_bytes)
    if home is not None:
        if not home.startswith("/tmp/"):
            raise ValueError(f"the sandbox's home must be under /tmp, not {home!r}")
        argv += ["--dir", home]
    for path in hidden_paths:
        # A server folder inside a read-only bind (a project under /usr/local, say) is covered
        # with an empty tmpfs, so the sandbox sees an empty folder there.
        real = os.path.realpath(path)
        if _visible_under_binds(real) and os.path.isdir(real):
            argv += ["--tmpfs", real]
    for path in read_only:
        argv += ["--ro-bind", path, path]
    # Same absolute path inside and out, so paths in tool results and ${CLAUDE_SKILL_DIR} agree.
    argv += ["--bind", str(root), str(root), "--ro-bind", str(skills_dir), str(skills_dir)]
    return [*argv, "--chdir", str(root)]


@functools.lru_cache(maxsize=8)
def _probe(bwrap: str) -> str:
    """ "" when this bwrap binary can start a sandbox here, else why not (cached per binary)."""
    try:
        done = subprocess.run(
            [*base_argv(bwrap), "true"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_PROBE_SECONDS,
            env={"PATH": "/usr/bin:/bin"},
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap does not start here ({exc})"
    if done.returncode != 0:
        first = (done.stderr.decode("utf-8", "replace").strip().splitlines() or ["no message"])[0]
        return f"bubblewrap does not work here ({first}; user namespaces may be disabled)"
    return ""


def describe_sandbox(mode: str) -> SandboxStatus:
    """What SANDBOX=mode gives on this machine; call it at start-up and on the admin home."""
    check_mode(mode)
    if mode == "none":
        return SandboxStatus(mode, "none", "SANDBOX=none is configured")
    bwrap = shutil.which("bwrap")
    if mode == "bwrap":
        # An explicit choice is honoured even when broken: the command then fails with the
        # install hint instead of silently running unsandboxed.
        return SandboxStatus(mode, "bwrap", "" if bwrap else "bubblewrap is not installed")
    if bwrap is None:
        return SandboxStatus(mode, "none", "bubblewrap is not installed")
    problem = _probe(bwrap)
    return SandboxStatus(mode, "none" if problem else "bwrap", problem)


def refusal(status: SandboxStatus, tool: str = "Bash") -> str:
    """The error a user without the unsandboxed permission gets when there is no sandbox."""
    return (
        f"{tool}: commands are turned off for you because they would run without a sandbox "
        f"({status.problem}), where they could read the server's secrets and other users' data. "
        f"An administrator can {INSTALL_HINT} and set SANDBOX=auto, or grant you the "
        f'"{PERMISSION_NAME}" permission.'
    )
