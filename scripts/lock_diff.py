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
    locked = {_norm(name): version for name, version in pins}
    installed = {_norm(d.metadata["Name"]): d.version for d in distributions()}
    changed = [
        f"    {name}: locked {locked[name]}, installed {version}"
        for name, version in sorted(installed.items())
        if name in locked and locked[name] != version
    ]
    print("\n".join(changed) or "    none: the lock is at the newest allowed versions")


if __name__ == "__main__":
    main(sys.argv[1])
