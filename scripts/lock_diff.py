"""Print the installed packages whose version differs from a lock file (scripts/test-newest.sh)."""

from __future__ import annotations

import re
import sys
from importlib.metadata import distributions


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def main(lock_path: str) -> None:
    with open(lock_path, encoding="utf-8") as lock:
        pins = re.findall(r"^([A-Za-z0-9_.-]+)==([^ ;\\]+)", lock.read(), re.M)
    # A universal lock may pin a package twice, under markers (numpy for Python < 3.12 and
    # for 3.12+): an installed version differs when it is none of them.
    locked: dict[str, set[str]] = {}
    for name, version in pins:
        locked.setdefault(_norm(name), set()).add(version)
    installed = {_norm(d.metadata["Name"]): d.version for d in distributions()}
    changed = [
        f"    {name}: locked {' or '.join(sorted(locked[name]))}, installed {version}"
        for name, version in sorted(installed.items())
        if name in locked and version not in locked[name]
    ]
    print("\n".join(changed) or "    none: the lock is at the newest allowed versions")


if __name__ == "__main__":
    main(sys.argv[1])
