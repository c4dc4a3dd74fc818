"""Commands of a root server without a sandbox run with every capability dropped.

Root with capabilities ignores file modes and ownership, so a command could rewrite a staged
skill, which must stay read-only. Dropping every capability (as bubblewrap's `--cap-drop ALL`
does inside the sandbox) leaves uid 0 an ordinary owner: it can still write what root owns
(the workspace) but not what belongs to another uid (the staged skills, see
`workspace.staged_owner`), and it cannot get capabilities back (no setuid binary, no file
capability, no mount, no ptrace of the server).

How: before exec, the child empties its bounding set, its ambient set and its inheritable set;
for uid 0 the capabilities after exec are (inheritable | bounding | ambient), all empty.
Emptying the bounding set needs CAP_SETPCAP, which `can_drop` checks in the parent so a
server without it gets a clear error instead of commands that silently keep their power.
"""

from __future__ import annotations

import ctypes
import os

PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
CAP_SETPCAP = 8
_CAPABILITY_VERSION_3 = 0x20080522
_LIBC = ctypes.CDLL(None, use_errno=True)


class _Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _Data(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def needed() -> bool:
    """True when commands without a sandbox must drop capabilities (the server runs as root)."""
    return os.geteuid() == 0


def last_cap() -> int:
    """The highest capability number this kernel knows."""
    try:
        with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return 63


def can_drop() -> bool:
    """Whether this process may empty a child's bounding set (it holds CAP_SETPCAP)."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> CAP_SETPCAP & 1)
    except (OSError, ValueError, IndexError):
        return False
    return False


def _fail() -> None:
    os.write(2, b"Bash: could not drop the command's capabilities; it was not run.\n")
    os._exit(126)


def drop_all(last: int) -> None:
    """Empty the bounding, ambient and inheritable sets (call in the child, before exec)."""
    for cap in range(last + 1):
        # EINVAL for a number this kernel does not have; anything else means the drop failed.
        if _LIBC.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22:
            _fail()
    _LIBC.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = _Header(_CAPABILITY_VERSION_3, 0)
    data = (_Data * 2)()
    if _LIBC.capget(ctypes.byref(header), data) != 0:
        _fail()
    for part in data:
        part.inheritable = 0
    if _LIBC.capset(ctypes.byref(header), data) != 0:
        _fail()
