"""Concurrency: many conversations streaming at once through one daphne process.

Run: .venv/bin/python bench/bench_concurrency.py [--conversations 100] [--rate 50] [--duration 60]
Each conversation's fake model sends `rate` deltas per second for `duration` seconds, every delta
being its own send time; the websocket client reads the stamps out of the (coalesced) text
frames and computes arrival - send per delta. Reports delivered/expected, p50/p99 added latency,
errors, and daphne's peak RSS (VmHWM from /proc). Targets: nothing lost, p99 < 50 ms, < 300 MB.
Everything is on loopback and stops by itself after duration + a grace period.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.live import STAMP, Daphne, FakeModel, Socket, machine, percentile  # noqa: E402

TARGETS = {"p99_ms": 50.0, "rss_mb": 300.0}


async def one_conversation(
    server: Daphne, conversation_id: int, command: str, latencies: list[float], deadline: float
) -> dict[str, object]:
    result: dict[str, object] = {"delivered": 0, "error": "", "status": ""}
    try:
        tab = await Socket(
            server.port, f"/ws/conversations/{conversation_id}/", server.session
        ).connect()
        tab.send({"action": "resume", "after": 0})
        await tab.until("resumed", timeout=60)
        tab.send({"action": "send", "text": command})
        seqs: list[int] = []
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                result["error"] = "timed out"
                break
            arrived, frame = await tab.receive(timeout=remaining)
            if "seq" in frame:
                seqs.append(frame["seq"])
            kind = frame.get("type")
            if kind == "text.delta":
                stamps = STAMP.findall(frame["text"])
                latencies.extend(arrived - float(s) for s in stamps)
                result["delivered"] = int(result["delivered"]) + len(stamps)
            elif kind == "error":
                result["error"] = frame.get("message", "error")
            elif kind == "closed":
                result["error"] = f"socket closed {frame.get('code')}"
                break
            elif kind == "run.finished":
                result["status"] = frame.get("status", "")
                break
        if seqs != sorted(seqs) or len(seqs) != len(set(seqs)):
            result["error"] = "frames out of order or duplicated"
        tab.close()
    except Exception as exc:  # counted, not raised: one failing tab must not hide the others
        result["error"] = f"{type(exc).__name__}: {exc}"
    return result


async def sample_memory(server: Daphne, peak: list[int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        current, hwm = server.rss_kb()
        peak[0] = max(peak[0], current, hwm)
        try:
            await asyncio.wait_for(stop.wait(), 0.5)
        except TimeoutError:
            pass


async def main_async(opts: argparse.Namespace) -> int:
    command = f"paced {opts.rate} {opts.duration}"
    expected_each = int(opts.rate * opts.duration)
    latencies: list[float] = []
    with FakeModel() as model, Daphne(model.url, conversations=opts.conversations) as server:
        baseline_kb = server.rss_kb()[0]
        peak = [0]
        stop = asyncio.Event()
        sampler = asyncio.create_task(sample_memory(server, peak, stop))
        deadline = time.monotonic() + opts.duration + opts.grace
        started = time.monotonic()
        results = await asyncio.gather(
            *(
                one_conversation(server, cid, command, latencies, deadline)
                for cid in server.conversation_ids
            )
        )
        wall = time.monotonic() - started
        stop.set()
        await sampler
        peak[0] = max(peak[0], server.rss_kb()[1])
    delivered = sum(int(r["delivered"]) for r in results)
    expected = expected_each * opts.conversations
    errors = [r["error"] for r in results if r["error"]]
    not_done = sum(1 for r in results if r["status"] != "done")
    p50, p99 = percentile(latencies, 50) * 1000, percentile(latencies, 99) * 1000
    rss_mb = peak[0] / 1024
    print(machine())
    print(
        f"{opts.conversations} conversations x {opts.rate} deltas/s x {opts.duration} s "
        f"(wall {wall:.1f} s)"
    )
    print(f"delivered/expected: {delivered}/{expected} ({delivered / expected * 100:.2f} %)")
    print(f"added latency per delta: p50 {p50:.1f} ms   p99 {p99:.1f} ms   max "
          f"{max(latencies, default=0) * 1000:.1f} ms")  # fmt: skip
    print(f"errors: {len(errors)} {sorted(set(errors))[:5]}   runs not done: {not_done}")
    print(f"daphne RSS: {baseline_kb / 1024:.0f} MB at start, peak {rss_mb:.0f} MB")
    ok = (
        delivered == expected
        and not errors
        and p99 < TARGETS["p99_ms"]
        and rss_mb < TARGETS["rss_mb"]
    )
    print("PASS" if ok else "MISS")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--conversations", type=int, default=100)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--grace", type=float, default=60.0, help="extra seconds before giving up")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
