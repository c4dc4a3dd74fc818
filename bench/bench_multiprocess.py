"""The multi-process load: RUN_EXECUTOR=worker, PostgreSQL, Redis, N web processes, M workers.

Run: .venv/bin/python bench/bench_multiprocess.py [--conversations 100] [--rate 50]
         [--duration 20] [--webs 2] [--workers 2] [--json figures.json] [--layer ours|core|pubsub]
Runs tests/multiprocess/bench_load.py with pytest, so the deployment is started exactly as the
multi-process tests start it (tests/multiprocess/conftest.py: a throw-away PostgreSQL cluster and
redis-server, daphne and `runworker` processes, all on loopback and all stopped at the end).
Needs PostgreSQL and redis-server installed (./scripts/test.sh installs them).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--conversations", type=int, default=100)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--grace", type=float, default=120.0)
    parser.add_argument("--webs", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", default="", help="also write the figures to this file")
    parser.add_argument(
        "--env", action="append", default=[], help="NAME=VALUE for every process (repeatable)"
    )
    parser.add_argument(
        "--layer",
        choices=["ours", "core", "pubsub"],
        default="",
        help="the channel layer (bench/layer_settings.py); the settings' own when not given",
    )
    opts = parser.parse_args()
    settings = dict(pair.partition("=")[::2] for pair in opts.env)
    if opts.layer:
        settings.update(DJANGO_SETTINGS_MODULE="bench.layer_settings", BENCH_LAYER=opts.layer)
    if any("=" not in pair for pair in opts.env):
        parser.error("--env takes NAME=VALUE")
    env = {
        **os.environ,
        "BENCH_CONVERSATIONS": str(opts.conversations),
        "BENCH_RATE": str(opts.rate),
        "BENCH_DURATION": str(opts.duration),
        "BENCH_GRACE": str(opts.grace),
        "BENCH_WEBS": str(opts.webs),
        "BENCH_WORKERS": str(opts.workers),
        "BENCH_RESULT": str(Path(opts.json).resolve()) if opts.json else "",
        "BENCH_ENV": json.dumps(settings),
    }
    command = [
        sys.executable,
        "-m",
        "pytest",
        "tests/multiprocess/bench_load.py",
        "-q",
        "-s",
        "-p",
        "no:cacheprovider",
    ]
    return subprocess.run(command, cwd=REPO, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
