#!/usr/bin/env python3
"""Wait until URL answers 200, at most SECONDS: `wait-http.py URL [SECONDS]` (systemd ExecStartPost).

Exit 0 once it answers, 1 when the time is up (the unit then fails to start and systemd says so).
Standard library only: it runs before anything else is known to work.
"""

from __future__ import annotations

import sys
import time
import urllib.error
import urllib.request


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print("usage: wait-http.py URL [SECONDS]", file=sys.stderr)
        return 2
    url = argv[0]
    deadline = time.monotonic() + (float(argv[1]) if len(argv) == 2 else 30.0)
    last = "no answer"
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return 0
                last = f"HTTP {response.status}"
        except urllib.error.HTTPError as exc:
            last = f"HTTP {exc.code}"
        except OSError as exc:
            last = str(getattr(exc, "reason", exc))
        if time.monotonic() >= deadline:
            print(f"{url} did not answer 200 in time (last: {last})", file=sys.stderr)
            return 1
        time.sleep(0.2)  # polling interval, not a synchronisation


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
