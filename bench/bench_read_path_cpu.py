"""CPU per delta of the SDK's read path on paced streams: the SDK's default HTTP client against
its aiohttp client (`anthropic[aiohttp]`'s DefaultAioHttpClient), and Skillscope's
`AnthropicModel.stream`, which streams on the latter; one process, no server.

Run: .venv/bin/python bench/bench_read_path_cpu.py [--conversations 100] [--rate 50]
     [--duration 10] [--rounds 2]
The fake model (bench/live.py) streams `conversations` answers at once, each `rate` deltas per
second for `duration` seconds: at that pace a delta is (nearly always) one TCP read, which is
what a server relaying live answers sees, unlike bench_adapter_cpu.py's as-fast-as-possible
answer (many deltas per read). Each side consumes them `rounds` times and the lowest CPU time
of this process is kept (`time.process_time`; the fake model runs in its own process). Until
2026-12-06 Skillscope streamed on an HTTP/1.1 client of its own (`core/http11.py`); its figures
against these are in bench/RESULTS.md.
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


async def main_async(opts: argparse.Namespace) -> None:
    import anthropic

    from skills_app.core.events import TextDelta
    from skills_app.core.llm import AnthropicModel, ModelRequest

    command = f"paced {opts.rate:g} {opts.duration:g}"
    messages = [{"role": "user", "content": [{"type": "text", "text": command}]}]
    warm = [{"role": "user", "content": [{"type": "text", "text": "fast 2000 8"}]}]
    with FakeModel() as fake:
        clients = {
            "default": anthropic.AsyncAnthropic(
                api_key="sk-bench", base_url=fake.url, max_retries=0
            ),
            "aiohttp": anthropic.AsyncAnthropic(
                api_key="sk-bench",
                base_url=fake.url,
                max_retries=0,
                http_client=anthropic.DefaultAioHttpClient(),
            ),
        }

        def raw(client: anthropic.AsyncAnthropic) -> Callable[[list[dict]], Awaitable[int]]:
            async def one(body: list[dict]) -> int:
                count = 0
                async with await client.messages.create(
                    model=MODEL, max_tokens=64000, messages=body, stream=True
                ) as stream:
                    async for event in stream:
                        count += event.type == "content_block_delta"
                return count

            return one

        adapter = AnthropicModel(api_key="sk-bench", base_url=fake.url, model=MODEL, max_retries=0)

        async def ours(body: list[dict]) -> int:
            request = ModelRequest(
                model=MODEL, system="", tools=[], messages=body, max_tokens=64000
            )
            return sum(
                [1 async for event in adapter.stream(request) if isinstance(event, TextDelta)]
            )

        sides: dict[str, Callable[[list[dict]], Awaitable[int]]] = {
            "raw stream, the SDK's default client": raw(clients["default"]),
            "raw stream, DefaultAioHttpClient (aiohttp)": raw(clients["aiohttp"]),
            "Skillscope AnthropicModel.stream (DefaultAioHttpClient)": ours,
        }
        for consume in sides.values():  # first-use costs; connections opened
            await asyncio.gather(*(consume(warm) for _ in range(opts.conversations)))
        print(machine())
        print(f"{opts.conversations} streams x {command}")
        best: dict[str, tuple[float, int]] = {}
        for round_ in range(opts.rounds):
            for name, consume in sides.items():
                print(f"round {round_ + 1}, {name}: load average before {load()}", flush=True)
                started, wall = time.process_time(), time.monotonic()
                counts = await asyncio.gather(
                    *(consume(messages) for _ in range(opts.conversations))
                )
                cpu, count = time.process_time() - started, sum(counts)
                print(
                    f"  {cpu:.2f} s CPU in {time.monotonic() - wall:.1f} s wall for {count} deltas:"
                    f" {cpu / count * 1e6:.1f} µs/delta",
                    flush=True,
                )
                if name not in best or cpu / count < best[name][0] / best[name][1]:
                    best[name] = (cpu, count)
        print("best of rounds:")
        for name, (cpu, count) in best.items():
            print(f"  {name}: {cpu / count * 1e6:.1f} µs/delta")
        for client in clients.values():
            await client.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--conversations", type=int, default=100)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=2)
    asyncio.run(main_async(parser.parse_args()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
