"""Capacity past one process: one daphne, N run workers, PostgreSQL and Redis, streams at a pace.

Run: .venv/bin/python bench/bench_workers.py [--workers 1] [--conversations 10] [--rate 20]
                                              [--duration 30] [--max-runs 0]
The deployment of docs/deploy.md on loopback: a throw-away PostgreSQL cluster and redis-server,
one daphne (RUN_EXECUTOR=worker) and `--workers` `manage.py runworker skillscope-runs`
processes. Each conversation's fake model sends `rate` deltas per second for `duration` seconds;
every delta carries its send time, and the client (one websocket per conversation, all through
the one daphne) computes arrival - send per delta, as bench_concurrency.py does. Also reported:
how long a message waited for a worker (send -> run.started), and each process's peak RSS and
CPU time. Needs PostgreSQL (initdb) and redis-server installed; everything stops by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.live import (  # noqa: E402
    REPO,
    STAMP,
    VENV_BIN,
    Daphne,
    FakeModel,
    Socket,
    free_port,
    machine,
    percentile,
)


@contextmanager
def postgres(synchronous_commit: str = "on") -> Iterator[str]:
    """A throw-away PostgreSQL cluster (as the postgres user when run as root); its URL."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        raise SystemExit("PostgreSQL is not installed (apt-get install postgresql)")
    bindir = Path(found[-1]).parent
    base = Path(tempfile.mkdtemp(prefix="skillscope-bench-pg-"))
    prefix: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(base, "postgres", "postgres")
        prefix = ["runuser", "-u", "postgres", "--"]
    port = free_port()

    def run(*args: str) -> None:
        subprocess.run([*prefix, *args], check=True, capture_output=True, timeout=120)

    data = str(base / "data")
    run(str(bindir / "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "--no-sync")
    # fsync stays on: the figures are for a database that keeps its data. synchronous_commit=off
    # (--synchronous-commit off) lets a commit return before its WAL reaches the disk.
    options = (
        f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c max_connections=200 "
        f"-c synchronous_commit={synchronous_commit}"
    )
    run(str(bindir / "pg_ctl"), "-D", data, "-l", str(base / "log"), "-o", options, "-w", "start")
    try:
        run(str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "bench")
        yield f"postgres://postgres@127.0.0.1:{port}/bench"
    finally:
        subprocess.run(
            [*prefix, str(bindir / "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop"],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(base, ignore_errors=True)


@contextmanager
def redis_server() -> Iterator[str]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed (apt-get install redis-server)")
    port = free_port()
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.kill()
        process.wait(10)


def proc_stats(pid: int) -> tuple[float, float]:
    """(peak RSS in MB, CPU seconds used) of a process, from /proc."""
    status = Path(f"/proc/{pid}/status").read_text()
    hwm = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM"))
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return hwm / 1024, (int(fields[11]) + int(fields[12])) / ticks


async def conversation(
    server: Daphne,
    cid: int,
    command: str,
    latencies: list[float],
    waits: list[float],
    deadline: float,
    firsts: list[float],
) -> dict[str, object]:
    """One tab: send, read the stamped deltas until run.finished (as bench_concurrency.py does),
    and note how long the message waited for a worker (send -> run.started) and for its first
    text (send -> the first text delta in the tab: the time to first token)."""
    result: dict[str, object] = {"delivered": 0, "error": "", "status": ""}
    try:
        tab = await Socket(server.port, f"/ws/conversations/{cid}/", server.session).connect()
        tab.send({"action": "resume", "after": 0})
        await tab.until("resumed", timeout=60)
        sent = time.time()
        tab.send({"action": "send", "text": command})
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                result["error"] = "timed out"
                break
            arrived, frame = await tab.receive(timeout=remaining)
            kind = frame.get("type")
            if kind == "run.started":
                waits.append(arrived - sent)
            elif kind == "text.delta":
                if not result.get("first"):
                    result["first"] = True
                    firsts.append(arrived - sent)
                stamps = STAMP.findall(frame["text"])
                latencies.extend(arrived - float(s) for s in stamps)
                result["delivered"] = int(result["delivered"]) + len(stamps)
            elif kind == "error":
                result["error"] = frame.get("message", "error")
            elif kind == "closed":
                result["error"] = f"socket closed {frame.get('code')}"
                break
            elif kind == "run.finished":
                result["status"] = frame["data"]["status"]
                break
        tab.close()
    except Exception as exc:  # counted, not raised: one failing tab must not hide the others
        result["error"] = f"{type(exc).__name__}: {exc}"
    return result


async def workers_ready(database: str, count: int, timeout: float = 120) -> None:
    """Wait until `count` workers have registered (the `Worker` table)."""
    import psycopg

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with psycopg.connect(database) as db:
            row = db.execute(
                "SELECT count(*) FROM skills_app_worker WHERE stopped_at IS NULL"
            ).fetchone()
        if row and row[0] >= count:
            return
        await asyncio.sleep(0.2)
    raise SystemExit(f"{count} workers did not register within {timeout} s")


async def main_async(opts: argparse.Namespace) -> int:
    command = f"paced {opts.rate} {opts.duration}"
    expected_each = int(opts.rate * opts.duration)
    latencies: list[float] = []
    waits: list[float] = []
    firsts: list[float] = []
    with (
        postgres(opts.synchronous_commit) as database,
        redis_server() as redis_url,
        FakeModel() as model,
    ):
        extra = {
            "DATABASE_URL": database,
            "REDIS_URL": redis_url,
            "RUN_EXECUTOR": "worker",
            "WORKER_MAX_RUNS": str(opts.max_runs),
            "ANTHROPIC_THINKING": "false",
        }
        with Daphne(model.url, conversations=opts.conversations, env_extra=extra) as server:
            workers = [
                subprocess.Popen(
                    [str(VENV_BIN / "python"), "manage.py", "runworker", "skillscope-runs"],
                    cwd=REPO,
                    env=server.env(),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                for _ in range(opts.workers)
            ]
            try:
                await workers_ready(database, len(workers))
                assert server.process is not None
                pids = [server.process.pid, *(w.pid for w in workers)]
                cpu_before = [proc_stats(pid)[1] for pid in pids]
                deadline = time.monotonic() + opts.duration + opts.grace
                started = time.monotonic()
                results = await asyncio.gather(
                    *(
                        conversation(server, cid, command, latencies, waits, deadline, firsts)
                        for cid in server.conversation_ids
                    )
                )
                wall = time.monotonic() - started
                stats = [proc_stats(pid) for pid in pids]
                # CPU spent while the conversations streamed (start-up excluded).
                spent = [after[1] - before for after, before in zip(stats, cpu_before, strict=True)]
            finally:
                for w in workers:
                    w.terminate()
                for w in workers:
                    try:
                        w.wait(15)
                    except subprocess.TimeoutExpired:
                        w.kill()
    delivered = sum(int(r["delivered"]) for r in results)
    expected = expected_each * opts.conversations
    errors = [r["error"] for r in results if r["error"]]
    not_done = sum(1 for r in results if r["status"] != "done")
    p50, p99 = percentile(latencies, 50) * 1000, percentile(latencies, 99) * 1000
    print(machine(), "load average", os.getloadavg())
    print(
        f"{opts.workers} worker(s), {opts.conversations} conversations x {opts.rate} deltas/s x "
        f"{opts.duration} s (wall {wall:.1f} s), WORKER_MAX_RUNS={opts.max_runs}, "
        f"synchronous_commit={opts.synchronous_commit}"
    )
    print(f"delivered/expected: {delivered}/{expected} ({delivered / expected * 100:.2f} %)")
    print(f"added latency per delta: p50 {p50:.1f} ms   p99 {p99:.1f} ms   max "
          f"{max(latencies, default=0) * 1000:.1f} ms")  # fmt: skip
    print(f"errors: {len(errors)} {sorted(set(errors))[:5]}   runs not done: {not_done}")
    print(f"wait for a worker (send -> run.started): p50 {percentile(waits, 50) * 1000:.0f} ms"
          f"   max {max(waits, default=0) * 1000:.0f} ms")  # fmt: skip
    print(f"time to first token (send -> first text in the tab): p50 "
          f"{percentile(firsts, 50) * 1000:.0f} ms   max {max(firsts, default=0) * 1000:.0f} ms")  # fmt: skip
    names = ["daphne", *(f"worker {i}" for i in range(1, opts.workers + 1))]
    for name, (rss, _), cpu in zip(names, stats, spent, strict=True):
        print(f"{name}: peak RSS {rss:.0f} MB, CPU while streaming {cpu:.1f} s")
    per_delta = 1000 / max(delivered, 1)
    print(f"CPU per delivered delta: daphne {spent[0] * per_delta:.2f} ms, "
          f"workers together {sum(spent[1:]) * per_delta:.2f} ms")  # fmt: skip
    return 0 if delivered == expected and not errors else 1


def main() -> int:
    # A SIGTERM (timeout, kill) unwinds like Ctrl-C: the servers started here are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--conversations", type=int, default=10)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--grace", type=float, default=60.0)
    parser.add_argument("--max-runs", type=int, default=0, help="WORKER_MAX_RUNS (0: no cap)")
    parser.add_argument("--synchronous-commit", choices=("on", "off"), default="on")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
