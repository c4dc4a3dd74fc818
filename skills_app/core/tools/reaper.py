"""Run one command and take every process it started down with it (the SANDBOX=none supervisor).

Run as a script: ``python -I -S reaper.py [--report-fd N] COMMAND [ARGS...]``. It marks itself a *child
subreaper* (PR_SET_CHILD_SUBREAPER), so every process the command starts stays its descendant:
an orphan (`setsid cmd &`, `nohup`, a double fork, `(sleep 79 &)`) is re-parented to the reaper
instead of to init. When the command's main process exits, or the reaper gets SIGTERM (the
server's timeout, or the server dying: the server sets that as the reaper's parent-death
signal), it SIGKILLs the command's process group and then every remaining descendant, found by
scanning /proc, until none is left, and exits with the command's status (re-raising its signal).
With `--report-fd N` it first writes the command's process group id to fd N, so the server can
kill that group at once on a timeout, without waiting for the reaper to be scheduled.

Not guaranteed: a process that leaves the tree through another program (asking systemd, cron or
at to start it), or a root command that kills the reaper first with SIGKILL. SANDBOX=none only
runs for users trusted with the server anyway; bubblewrap's PID namespace has no such gap.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
# Fork bombs keep making processes while they are killed; give up after this long.
_KILL_SECONDS = 5.0


class _Stop(Exception):
    """Raised by the signal handler so a blocking wait returns (PEP 475 would retry it)."""


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def _stop(_signum: int, _frame: object) -> None:
    raise _Stop


def descendants(root: int) -> list[int]:
    """Pids of the live processes below `root`, from one scan of /proc."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue  # exited while scanning
        # The command name may hold spaces and parentheses: the fields start after the last ')'.
        fields = stat[stat.rindex(b")") + 2 :].split()
        if fields[0] == b"Z":
            continue
        children.setdefault(int(fields[1]), []).append(int(name))
    found: list[int] = []
    todo = [root]
    while todo:
        for pid in children.get(todo.pop(), ()):
            found.append(pid)
            todo.append(pid)
    return found


def _reap(main: int, status: int | None) -> tuple[bool, int | None]:
    """Collect exited children without blocking; (children remain, main's status if seen)."""
    while True:
        try:
            pid, st = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False, status
        if pid == 0:
            return True, status
        if pid == main:
            status = st


def kill_all(main: int, status: int | None) -> int | None:
    """SIGKILL the command's group and every descendant until none is left; main's status."""
    me = os.getpid()
    deadline = time.monotonic() + _KILL_SECONDS
    next_scan = 0.0
    while True:
        now = time.monotonic()
        if now >= next_scan:
            # One killpg reaches every process still in the command's group at once (a fork
            # racing it fails); the /proc scan finds the ones that left the group (setsid).
            try:
                os.killpg(main, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            for pid in descendants(me):
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            # Killed processes take a moment to die; rescanning at once would only find them
            # again, so reap for a while before the next scan.
            next_scan = now + 0.05
        remaining, status = _reap(main, status)
        if not remaining or now > deadline:
            return status
        time.sleep(0.002)


def _exit_like(status: int | None) -> None:
    if status is None:
        os._exit(137)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)  # a signal that does not kill (none should reach here)
    os._exit(os.waitstatus_to_exitcode(status))


def main(argv: list[str]) -> None:
    """Start argv as a child in its own process group, wait, then kill everything left."""
    report = -1
    if argv[:1] == ["--report-fd"]:
        report, argv = int(argv[1]), argv[2:]
    if not argv:
        sys.stderr.write("reaper: no command given\n")
        os._exit(2)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, _stop)
    child = os.fork()
    if child == 0:
        # Python ignores SIGPIPE and SIGXFSZ, and exec keeps ignored signals ignored: restore
        # them so the command dies of them as it would in a shell.
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)
        os.setpgid(0, 0)  # one group: the first kill is a single atomic killpg
        if report >= 0:
            os.close(report)
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        try:
            os.execvp(argv[0], argv)
        except OSError as exc:
            sys.stderr.write(f"cannot run {argv[0]}: {exc}\n")
            os._exit(127)
    try:
        os.setpgid(child, child)  # also here, so a kill that comes first still finds the group
    except OSError:
        pass
    if report >= 0:
        try:
            os.write(report, f"{child}\n".encode())
        except OSError:
            pass
        os.close(report)
    # Only the command holds the output pipe, so the server's reader ends with the command.
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 1)
    os.dup2(null, 2)
    status: int | None = None
    try:
        while status is None:
            pid, st = os.waitpid(-1, 0)
            if pid == child:
                status = st
    except (_Stop, ChildProcessError):
        pass
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)  # finish the clean-up whatever arrives now
    _exit_like(kill_all(child, status))


if __name__ == "__main__":
    main(sys.argv[1:])
