"""Time to first token: from Send in the tab to the first text delta, against the bare SDK.

Run: .venv/bin/python bench/bench_ttft.py [--trials 20] [--mode single|multi|both] [--json F]
         [--env NAME=VALUE ...]
single: one daphne process (SQLite, in-memory channel layer, inline runs), as `scripts/run.sh`.
multi: 2 web processes and 2 workers with PostgreSQL and Redis, started as the multi-process tests
start them (it runs tests/multiprocess/bench_ttft.py with pytest; needs postgresql and
redis-server installed). Each mode measures the bare `anthropic` SDK against the same fake model
first, in its own process, in the same run. Target (issue 27): within 150 ms of the SDK on a quiet
machine. The phases (user message stored, run started, first delta) say what dominates.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.live import VENV_BIN, Daphne, FakeModel, load, machine  # noqa: E402
from bench.ttft import summary, tab_ttft  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
TARGET_MS = 150.0


def bare(url: str, trials: int) -> list[float]:
    """The bare SDK's times, in a process of its own (as daphne is)."""
    done = subprocess.run(
        [str(VENV_BIN / "python"), "-m", "bench.ttft", "bare", url, str(trials)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    times: list[float] = json.loads(done.stdout.strip().splitlines()[-1])
    return times


async def single(trials: int, settings: dict[str, str]) -> dict[str, object]:
    with FakeModel() as model:
        sdk = await asyncio.to_thread(bare, model.url, trials)
        with Daphne(model.url, conversations=trials + 1, env_extra=settings) as server:
            headers = {"Origin": f"http://127.0.0.1:{server.port}"}
            ours = await tab_ttft(server.port, server.conversation_ids, server.session, headers)
    return {"mode": "single process", **summary(sdk, ours)}


def multi(trials: int, settings: dict[str, str]) -> dict[str, object]:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        result_path = handle.name
    env = {
        **os.environ,
        "BENCH_TRIALS": str(trials),
        "BENCH_RESULT": result_path,
        "BENCH_ENV": json.dumps(settings),
    }
    command = [sys.executable, "-m", "pytest", "tests/multiprocess/bench_ttft.py", "-q", "-s"]
    done = subprocess.run([*command, "-p", "no:cacheprovider"], cwd=REPO, env=env)
    if done.returncode != 0:
        raise RuntimeError("the multi-process run failed (its output is above)")
    result: dict[str, object] = json.loads(Path(result_path).read_text())
    return result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--mode", choices=("single", "multi", "both"), default="both")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument(
        "--env", action="append", default=[], help="NAME=VALUE for every process (repeatable)"
    )
    opts = parser.parse_args()
    if any("=" not in pair for pair in opts.env):
        parser.error("--env takes NAME=VALUE")
    settings = dict(pair.partition("=")[::2] for pair in opts.env)
    report: dict[str, object] = {"machine": machine(), "load_before": load(), "results": []}
    results: list[dict[str, object]] = []
    if opts.mode in ("single", "both"):
        results.append(asyncio.run(single(opts.trials, settings)))
    if opts.mode in ("multi", "both"):
        results.append(multi(opts.trials, settings))
    report["results"] = results
    for result in results:
        added = float(result["added_median_ms"])  # type: ignore[arg-type]
        verdict = "PASS" if added <= TARGET_MS else "MISS"
        print(
            f"{result['mode']}: Skillscope {result['skillscope']}, bare SDK {result['bare_sdk']}, "
            f"added {added:.0f} ms (target {TARGET_MS:.0f} ms: {verdict}); "
            f"phases {result['phases_median_ms']}"
        )
    print(json.dumps(report["machine"]))
    if opts.json:
        Path(opts.json).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
