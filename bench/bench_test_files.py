"""Time test files in two checkouts, alternating, under the same load (issue 24, item 7).

    .venv/bin/python bench/bench_test_files.py --base /path/to/main-checkout [--rounds 2] \
        [group=file,file ...]

Each group is one pytest command per checkout (a group lets a file that was split, such as the
agent loop into its in-memory and end-to-end halves, be compared with the one it came from:
`loop=tests/runs/test_agent_loop.py` in the base, `loop=tests/runs/test_agent_loop.py,tests/core/test_core_loop.py`
here; files missing in a checkout are left out of its command). Both checkouts are run with this
interpreter (the project installs no packages of its own, so each imports its own tree). Prints,
per group: the tests that passed, pytest's own seconds (median of the rounds) and the load
average (1 min) when each command started. Timings on a shared machine are noisy: compare the
two columns of the same round, and quote the load.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
SUMMARY = re.compile(r"(\d+) passed.* in ([\d.]+)s")

DEFAULT_GROUPS = {
    "loop": ["tests/runs/test_agent_loop.py", "tests/core/test_core_loop.py"],
    "chat_command": ["tests/management/test_chat_command.py"],
    "consumer": ["tests/chat/test_consumer.py"],
    "live_streams": ["tests/runs/test_live_streams.py"],
    "architecture": ["tests/test_architecture.py"],
    "faults_websocket": ["tests/chat/test_faults_websocket.py"],
    "ops_health": ["tests/ops/test_ops_health.py"],
    "layers": ["tests/webapp/test_layers.py"],
    "events_fragments": ["tests/runs/test_events.py", "tests/chat/test_fragments.py"],
    "workers": [
        "tests/runs/test_run_queue.py",
        "tests/runs/test_worker_executor.py",
        "tests/runs/test_worker_heartbeat.py",
        "tests/runs/test_worker_liveness.py",
    ],
    "transactions": [
        "tests/chat/test_attachments.py",
        "tests/compare/test_compare.py",
        "tests/chat/test_model_picker.py",
        "tests/runs/test_run_recovery.py",
        "tests/chat/test_approval_words.py",
        "tests/core/profiles/test_golden_requests.py",
    ],
}


def run(tree: Path, files: list[str]) -> tuple[int, float, float]:
    present = [f for f in files if (tree / f).is_file()]
    load = os.getloadavg()[0]
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *present, "-q", "-p", "no:cacheprovider"],
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.monotonic() - started
    found = SUMMARY.search(done.stdout.splitlines()[-1] if done.stdout else "")
    if done.returncode != 0 or found is None:
        print(done.stdout[-2000:], file=sys.stderr)
        raise SystemExit(f"{tree}: {present} did not pass")
    return int(found.group(1)), float(found.group(2)) or wall, load


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("groups", nargs="*")
    args = parser.parse_args()
    groups = DEFAULT_GROUPS
    if args.groups:
        groups = dict(g.split("=", 1) for g in args.groups)
        groups = {k: v.split(",") for k, v in groups.items()}
    print(
        f"{'group':18} {'base tests':>10} {'base s':>8} {'load':>5} | {'now tests':>9} {'now s':>7} {'load':>5}"
    )
    totals = [0.0, 0.0]
    for name, files in groups.items():
        base_times, now_times = [], []
        for _ in range(args.rounds):
            base_count, base_s, base_load = run(args.base, files)
            now_count, now_s, now_load = run(HERE, files)
            base_times.append(base_s)
            now_times.append(now_s)
        base_med, now_med = statistics.median(base_times), statistics.median(now_times)
        totals[0] += base_med
        totals[1] += now_med
        print(
            f"{name:18} {base_count:>10} {base_med:>8.1f} {base_load:>5.1f} | "
            f"{now_count:>9} {now_med:>7.1f} {now_load:>5.1f}",
            flush=True,
        )
    print(f"{'total':18} {'':>10} {totals[0]:>8.1f} {'':>5} | {'':>9} {totals[1]:>7.1f}")


if __name__ == "__main__":
    main()
