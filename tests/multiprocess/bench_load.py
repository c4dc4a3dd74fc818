"""The multi-process load benchmark: RUN_EXECUTOR=worker, PostgreSQL, Redis, web processes
(BENCH_WEBS, two by default) and Channels workers (BENCH_WORKERS, two) sustaining many paced
streams, against the bare SDK.

Not collected with the test suite (its name does not start with test_). Run it through
`bench/bench_multiprocess.py`, which passes the load in BENCH_* variables and runs this file with
pytest so that it gets tests/multiprocess/conftest.py's PostgreSQL, Redis and processes.

The fake model is bench/live.py's (an asyncio SSE server in its own process, stamping every
delta with its send time). The bare SDK consumes the same load first, in one process; then every
conversation gets one websocket (spread evenly over the web processes) and one paced message, executed
by the workers. Reported: deltas delivered (assembled by offset as the browser does), order,
added latency per delta, and the peak memory of each process.
"""

from __future__ import annotations

import asyncio
import html
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bench.live import _SETUP, STAMP, FakeModel, StreamText, machine, percentile, run_bare
from tests.multiprocess.conftest import PUBLIC_HOST, ROOT, Deployment
from tests.multiprocess.wsclient import WebSocket

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(3600)]

CONVERSATIONS = int(os.environ.get("BENCH_CONVERSATIONS", "100"))
RATE = float(os.environ.get("BENCH_RATE", "50"))
DURATION = float(os.environ.get("BENCH_DURATION", "20"))
GRACE = float(os.environ.get("BENCH_GRACE", "120"))
WORKERS = int(os.environ.get("BENCH_WORKERS", "2"))
WEBS = int(os.environ.get("BENCH_WEBS", "2"))
RESULT = os.environ.get("BENCH_RESULT", "")
# BENCH_TRACE=1 prints, for a tab whose text repeats or has a hole, the frames it got.
TRACE = os.environ.get("BENCH_TRACE", "") == "1"


def _p50_max(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    return {"p50": round(percentile(values, 50), 2), "max": round(max(values), 2)}


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM"):
            return int(line.split()[1]) / 1024
    return 0.0


def _cpu_seconds() -> dict[int, tuple[str, float]]:
    """Every process's name (its command) and CPU seconds so far (user + system), by pid."""
    tick = os.sysconf("SC_CLK_TCK")
    found: dict[int, tuple[str, float]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name, fields = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :]
        utime, stime = fields.split()[11:13]
        found[int(entry.name)] = (name, (int(utime) + int(stime)) / tick)
    return found


def _cpu_by_role(
    before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]], roles: dict[int, str]
) -> dict[str, float]:
    """CPU seconds spent between the two snapshots, by role (a deployment's process, PostgreSQL,
    Redis, the fake model, this client) and "other" for everything else on the machine. Only
    processes alive at the end count (one that exited meanwhile, a PostgreSQL backend of a
    closed connection, say, is left out), and any PostgreSQL or Redis on the machine counts."""
    spent: Counter[str] = Counter()
    for pid, (name, seconds) in after.items():
        role = roles.get(pid) or {"postgres": "postgres", "redis-server": "redis"}.get(
            name, "other"
        )
        spent[role] += seconds - before.get(pid, (name, 0.0))[1]
    return {role: round(seconds, 1) for role, seconds in spent.most_common()}


def _p99_per_second(stamped: list[tuple[float, float]]) -> list[float]:
    """The p99 added latency (ms) of the deltas sent in each second of the load, in order."""
    if not stamped:
        return []
    first = min(sent for sent, _ in stamped)
    seconds: dict[int, list[float]] = {}
    for sent, latency in stamped:
        seconds.setdefault(int(sent - first), []).append(latency)
    return [round(percentile(seconds[s], 99) * 1000) for s in sorted(seconds)]


def _traced(frame: dict[str, Any], text: StreamText) -> str:
    if frame.get("type") in ("text.delta", "thinking.delta"):
        key = (frame["run"], frame["call"], frame["index"], frame["type"])
        return (
            f"{frame['type']} {key[:3]} offset={frame['offset']} len={len(frame['text'])}"
            f" have={text.blocks.get(key)}"
        )
    return f"{frame.get('type')} seq={frame.get('seq')}"


async def _conversation(port: int, conversation: int, session: str, command: str, deadline: float):
    result: dict[str, Any] = {
        "delivered": 0,
        "latencies": [],
        "stamped": [],
        "error": "",
        "ordered": True,
    }
    try:
        tab = await WebSocket.connect(
            "127.0.0.1",
            port,
            f"/ws/conversations/{conversation}/",
            # As nginx passes a browser's websocket on: the public name and its HTTPS origin.
            headers={
                "Host": PUBLIC_HOST,
                "Origin": f"https://{PUBLIC_HOST}",
                "Cookie": f"sessionid={session}",
            },
            timeout=60,
        )
    except Exception as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"
        return result
    try:
        await tab.send_json({"action": "resume", "after": 0})
        while (await tab.receive_frame(timeout=60)).get("type") != "resumed":
            pass
        await tab.send_json({"action": "send", "text": command})
        sent_at = time.time()
        text, last, seqs = StreamText(), 0.0, []
        trace: list[str] = []
        while True:
            frame = await tab.receive_frame(timeout=max(0.1, deadline - time.monotonic()))
            arrived = time.time()
            if TRACE:
                trace.append(_traced(frame, text))
            seqs.extend([frame["seq"]] if "seq" in frame else [])
            stamps: list[str] = []
            if frame.get("type") == "text.delta":
                # Its first words under the burst: from its send to the first text in the tab.
                result.setdefault("first_word_s", arrived - sent_at)
                # Pieces arrive once each, in place (StreamText counts any other as an error).
                stamps = STAMP.findall(text.new(frame))
            elif frame.get("type") == "message.stored" and frame["data"]["role"] == "assistant":
                # What arrived only with the stored answer (its live frames were dropped).
                stamps = STAMP.findall(html.unescape(frame["html"]))[result["delivered"] :]
            for stamp in stamps:
                sent = float(stamp)
                result["ordered"] = result["ordered"] and sent >= last
                result["latencies"].append(arrived - sent)
                result["stamped"].append((sent, arrived - sent))
                result["delivered"] += 1
                last = sent
            if frame.get("type") == "error":
                result["error"] = frame.get("message", "error")
            if frame.get("type") == "run.finished":
                result["status"] = frame["data"]["status"]
                break
        if text.errors or seqs != sorted(set(seqs)):
            result["ordered"] = False
        if TRACE and (not result["ordered"] or result["delivered"] != int(RATE * DURATION)):
            print(f"conversation {conversation}: {result['delivered']} stamps", *trace, sep="\n  ")
    except Exception as exc:  # counted, not raised: one failing tab must not hide the others
        result["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        await tab.close()
    return result


async def test_workers_sustain_the_load(deployment: Deployment) -> None:
    command = f"paced {RATE:g} {DURATION:g}"
    expected = int(RATE * DURATION) * CONVERSATIONS
    with FakeModel() as model:
        bare = await asyncio.to_thread(
            run_bare, model.url, CONVERSATIONS, command, DURATION + GRACE
        )
        deployment.env.update(
            ANTHROPIC_BASE_URL=model.url,
            # The production defaults: the fixture's short ones (made for killing workers) would
            # take a run whose heartbeat a loaded machine delays for a dead one.
            RUN_HEARTBEAT_SECONDS="5",
            RUN_STALE_SECONDS="30",
            RATE_LIMIT_MESSAGES_PER_MINUTE="100000",
            RATE_LIMIT_CONCURRENT_RUNS="100000",
            # Every conversation streams at once: the workers share them (the default cap of 10
            # runs per worker would queue 80 of the 100 and measure the queue, not the streams).
            WORKER_MAX_RUNS=str(-(-CONVERSATIONS // WORKERS)),
            # INFO: the fixtures know a worker is ready by the line it logs when it starts.
            LOG_LEVEL="INFO",
        )
        # A setting to compare (bench/bench_multiprocess.py --env NAME=VALUE).
        deployment.env.update(json.loads(os.environ.get("BENCH_ENV") or "{}"))
        setup = subprocess.run(
            [sys.executable, "-c", _SETUP.format(n=CONVERSATIONS)],
            cwd=ROOT,
            env={**deployment.env, "DJANGO_SETTINGS_MODULE": "webapp.settings"},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert setup.returncode == 0, setup.stderr[-3000:]
        data = json.loads(setup.stdout.strip().splitlines()[-1])
        webs = [f"web-{i}" for i in range(1, WEBS + 1)]
        workers = [f"worker-{i}" for i in range(1, WORKERS + 1)]
        for name in webs:
            deployment.spawn_web(name)
        for name in workers:
            deployment.spawn_worker(name)
        deployment.wait_ready(*webs, *workers)
        roles = {deployment.processes[name].pid: name for name in webs + workers}
        roles.update({os.getpid(): "client (this process)", model.pid: "fake model"})
        cpu_before = _cpu_seconds()
        try:
            started = time.monotonic()
            deadline = started + DURATION + GRACE
            results = await asyncio.gather(
                *(
                    _conversation(
                        deployment.ports[webs[i % len(webs)]],
                        cid,
                        data["session"],
                        command,
                        deadline,
                    )
                    for i, cid in enumerate(data["conversations"])
                )
            )
            wall = time.monotonic() - started
            cpu = _cpu_by_role(cpu_before, _cpu_seconds(), roles)
            memory = {name: _peak_rss_mb(deployment.processes[name].pid) for name in webs + workers}
        except BaseException:
            print(deployment.all_logs())
            raise
    latencies = [lat for r in results for lat in r["latencies"]]
    ours = {
        "delivered": sum(r["delivered"] for r in results),
        "ordered": all(r["ordered"] for r in results),
        "errors": sorted({r["error"] for r in results if r["error"]}),
        "not_done": sum(1 for r in results if r.get("status") != "done"),
        "statuses": dict(Counter(str(r.get("status", "none")) for r in results)),
        "p50_ms": percentile(latencies, 50) * 1000,
        "p99_ms": percentile(latencies, 99) * 1000,
        "max_ms": max(latencies, default=0.0) * 1000,
        "p99_ms_per_second": _p99_per_second([s for r in results for s in r["stamped"]]),
        # All conversations send at once: send to first text in the tab, p50 and the last one.
        "first_words_s": _p50_max([r["first_word_s"] for r in results if "first_word_s" in r]),
        "wall_s": wall,
        "cpu_s": cpu,
        "peak_rss_mb": memory,
    }
    report = {"machine": machine(), "load": [CONVERSATIONS, RATE, DURATION, WEBS, WORKERS]}
    report.update(expected=expected, bare=bare, skillscope=ours)
    print(json.dumps(report, indent=2))
    if RESULT:
        Path(RESULT).write_text(json.dumps(report, indent=2))
    assert ours["delivered"] == expected and ours["ordered"] and not ours["errors"], ours
