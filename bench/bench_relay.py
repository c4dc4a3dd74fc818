"""Relay overhead: a long answer streamed as fast as the fake model can, received two ways.

Run: .venv/bin/python bench/bench_relay.py [--chars 200000] [--chunk 8] [--rounds 3]
1. a bare `anthropic` SDK client consuming the stream (the physical limit of this machine);
2. a websocket client receiving the same answer through daphne + Skillscope's consumer, from
   sending the message to the run's end (`run.finished`).
Reports the median time of each, their ratio (issue 15: at most 1.15) and whether the relayed
text is complete and in order (the client assembles the coalesced pieces by offset, as the
browser does; stored events must arrive in seq order).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anthropic  # noqa: E402

from bench.live import Daphne, FakeModel, Socket, StreamText, fast_text, machine  # noqa: E402

TARGET = 1.15


async def bare_sdk(url: str, command: str) -> tuple[float, str]:
    client = anthropic.AsyncAnthropic(api_key="sk-bench", base_url=url, max_retries=0)
    pieces: list[str] = []
    start = time.perf_counter()
    async with client.messages.stream(
        model="bench", max_tokens=64000, messages=[{"role": "user", "content": command}]
    ) as stream:
        async for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                pieces.append(event.delta.text)
    elapsed = time.perf_counter() - start
    await client.close()
    return elapsed, "".join(pieces)


async def through_skillscope(server: Daphne, conversation_id: int, command: str):
    tab = await Socket(
        server.port, f"/ws/conversations/{conversation_id}/", server.session
    ).connect()
    tab.send({"action": "resume", "after": 0})
    await tab.until("resumed")
    start = time.perf_counter()
    tab.send({"action": "send", "text": command})
    frames = [f for _t, f in await tab.until("run.finished", timeout=600)]
    elapsed = time.perf_counter() - start
    tab.close()
    seqs = [f["seq"] for f in frames if "seq" in f]
    assembled = StreamText()
    text = "".join(assembled.new(f) for f in frames if f.get("type") == "text.delta")
    deltas = sum(1 for f in frames if f.get("type") == "text.delta")
    in_order = seqs == sorted(seqs) and len(seqs) == len(set(seqs)) and not assembled.errors
    return elapsed, text, deltas, in_order, frames[-1]["data"]["status"]


async def main_async(opts: argparse.Namespace) -> int:
    command = f"fast {opts.chars} {opts.chunk}"
    expected = fast_text(opts.chars)
    sdk_times, ws_times, ok = [], [], True
    frames_seen = 0
    with FakeModel() as model, Daphne(model.url, conversations=opts.rounds) as server:
        await bare_sdk(model.url, "fast 1000 8")  # warm up both paths
        await through_skillscope(server, server.conversation_ids[0], "fast 1000 8")
        for i in range(opts.rounds):
            elapsed, text = await bare_sdk(model.url, command)
            ok &= text == expected
            sdk_times.append(elapsed)
            elapsed, text, frames_seen, in_order, status = await through_skillscope(
                server, server.conversation_ids[i], command
            )
            if text != expected or not in_order or status != "done":
                same = next(
                    (k for k, (a, b) in enumerate(zip(text, expected, strict=False)) if a != b),
                    None,
                )
                print(
                    f"  relay problem: {len(text)}/{len(expected)} chars, first difference at "
                    f"{same}, in order: {in_order}, status: {status}"
                )
                ok = False
            ws_times.append(elapsed)
            print(f"round {i + 1}: sdk {sdk_times[-1]:.3f} s   websocket {elapsed:.3f} s")
    sdk, ws = statistics.median(sdk_times), statistics.median(ws_times)
    ratio = ws / sdk
    deltas = -(-opts.chars // opts.chunk)
    print(machine())
    print(f"answer: {opts.chars} chars in {deltas} deltas of {opts.chunk} chars")
    print(f"bare SDK:      median {sdk:.3f} s  ({deltas / sdk:,.0f} deltas/s)")
    print(f"via websocket: median {ws:.3f} s  ({frames_seen} coalesced text frames)")
    verdict = "PASS" if ratio <= TARGET and ok else "MISS"
    print(
        f"ratio: {ratio:.3f} x the bare SDK (target <= {TARGET})  complete+ordered: {ok}  {verdict}"
    )
    return 0 if verdict == "PASS" else 1


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chars", type=int, default=200_000)
    parser.add_argument("--chunk", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
