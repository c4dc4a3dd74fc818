"""CPU per streamed delta of the model adapter against the bare SDK, one process, no server.

Run: .venv/bin/python bench/bench_adapter_cpu.py [--chars 200000] [--rounds 5]
The fake model (bench/live.py) streams one long answer in 8-character deltas as fast as it can;
each side consumes it `rounds` times and the best CPU time (`time.process_time`, this process
only) is kept: CPU time, unlike latency, hardly depends on what else the machine runs. Sides:
`messages.stream()` read to the end (the bare SDK as bench_concurrency.py measures it), the raw
`messages.create(stream=True)` (the SDK's floor), and Skillscope's `AnthropicModel.stream`
(what a run does per delta before the live path: parse, accumulate, translate). The profile
that led here is in bench/PROFILE.md.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.live import FakeModel, load, machine  # noqa: E402

MODEL = "claude-opus-4-8"


async def best_cpu(consume: Callable[[], Awaitable[int]], rounds: int) -> tuple[float, int]:
    times, count = [], 0
    for _ in range(rounds):
        started = time.process_time()
        count = await consume()
        times.append(time.process_time() - started)
    return min(times), count


async def main_async(opts: argparse.Namespace) -> None:
    import anthropic

    from skills_app.core.events import TextDelta
    from skills_app.core.llm import AnthropicModel, ModelRequest

    prompt = f"fast {opts.chars} 8"
    messages = [{"role": "user", "content": [{"type": "text", "text": prompt}]}]
    with FakeModel() as fake:
        client = anthropic.AsyncAnthropic(api_key="sk-bench", base_url=fake.url, max_retries=0)

        async def helper() -> int:
            count = 0
            async with client.messages.stream(
                model=MODEL, max_tokens=64000, messages=messages
            ) as stream:
                async for event in stream:
                    count += event.type == "content_block_delta"
            return count

        async def raw() -> int:
            count = 0
            async with await client.messages.create(
                model=MODEL, max_tokens=64000, messages=messages, stream=True
            ) as stream:
                async for event in stream:
                    count += event.type == "content_block_delta"
            return count

        adapter = AnthropicModel(api_key="sk-bench", base_url=fake.url, model=MODEL, max_retries=0)
        request = ModelRequest(
            model=MODEL, system="", tools=[], messages=messages, max_tokens=64000
        )

        async def ours() -> int:
            return sum(
                [1 async for event in adapter.stream(request) if isinstance(event, TextDelta)]
            )

        await helper()  # first-use costs
        await ours()
        print(machine())
        print(f"load average before: {load()}")
        results = {}
        for name, consume in (
            ("bare SDK, messages.stream()", helper),
            ("bare SDK, raw messages.create(stream=True)", raw),
            ("Skillscope AnthropicModel.stream", ours),
        ):
            cpu, count = await best_cpu(consume, opts.rounds)
            results[name] = cpu
            print(f"{name}: {cpu:.2f} s CPU for {count} deltas, {cpu / count * 1e6:.1f} µs/delta")
        await client.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chars", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    asyncio.run(main_async(parser.parse_args()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
