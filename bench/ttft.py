"""Time to first token, from pressing Send to the first text in the tab, and for the bare SDK.

Shared by bench/bench_ttft.py (one daphne process) and tests/multiprocess/bench_ttft.py (2 web
processes, 2 workers, PostgreSQL, Redis). A trial is one message in a conversation of its own:
the tab (a websocket, resumed like the page does) sends it and notes when each of these arrives:
the user's message stored (`message.stored`), the run started (`run.started`), the first text
delta. The bare SDK's trial is `messages.stream(...)` from the call to its first text delta,
against the same fake model (bench/live.py: its first delta goes out right after the headers).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from typing import Any

from bench.live import percentile

COMMAND = "fast 400 8"  # 50 deltas, the first one at once


async def bare_ttft(url: str, trials: int) -> list[float]:
    """Seconds from the SDK call to its first text delta, per trial (one warm client)."""
    import anthropic

    client = anthropic.AsyncAnthropic(api_key="sk-bench", base_url=url, max_retries=0)
    times: list[float] = []
    for trial in range(trials + 1):
        started = time.perf_counter()
        first = None
        async with client.messages.stream(
            model="bench", max_tokens=1024, messages=[{"role": "user", "content": COMMAND}]
        ) as stream:
            async for event in stream:
                if first is None and event.type == "content_block_delta":
                    first = time.perf_counter() - started
        if trial:  # the first one pays the client's first-use costs, as a server's first does
            assert first is not None
            times.append(first)
    await client.close()
    return times


async def tab_trial(
    port: int, conversation: int, session: str, headers: dict[str, str]
) -> dict[str, float]:
    """One message through the chat websocket: seconds from Send to each milestone."""
    from tests.multiprocess.wsclient import WebSocket

    ws = await WebSocket.connect(
        "127.0.0.1",
        port,
        f"/ws/conversations/{conversation}/",
        headers={**headers, "Cookie": f"sessionid={session}"},
        timeout=60,
    )
    try:
        await ws.send_json({"action": "resume", "after": 0})
        while (await ws.receive_frame(timeout=60)).get("type") != "resumed":
            pass
        marks: dict[str, float] = {}
        started = time.perf_counter()
        await ws.send_json({"action": "send", "text": COMMAND})
        while True:
            frame = await ws.receive_frame(timeout=60)
            now = time.perf_counter() - started
            kind = frame.get("type", "")
            if kind == "message.stored" and "stored" not in marks:
                marks["stored"] = now
            elif kind == "run.started":
                marks.setdefault("started", now)
            elif kind == "text.delta":
                marks.setdefault("first_delta", now)
            elif kind == "run.finished":
                marks["finished"] = now
                return marks
            elif kind == "error":
                raise RuntimeError(f"the message was refused: {frame.get('text', '')}")
    finally:
        await ws.close()


async def tab_ttft(
    port: int, conversations: list[int], session: str, headers: dict[str, str]
) -> list[dict[str, float]]:
    """A trial per conversation, one after the other; the first is a warm-up and not kept."""
    results = []
    for position, conversation in enumerate(conversations):
        marks = await tab_trial(port, conversation, session, headers)
        if position:
            results.append(marks)
    return results


def summary(bare: list[float], ours: list[dict[str, float]]) -> dict[str, Any]:
    """Medians and p90s in ms, the difference to the SDK, and the phases."""

    def ms(values: list[float]) -> dict[str, float]:
        return {
            "median_ms": round(statistics.median(values) * 1000, 1),
            "p90_ms": round(percentile(values, 90) * 1000, 1),
        }

    first = [m["first_delta"] for m in ours if "first_delta" in m]
    result: dict[str, Any] = {
        "trials": len(ours),
        "bare_sdk": ms(bare),
        "skillscope": ms(first),
        "phases_median_ms": {
            name: round(statistics.median(m[name] for m in ours if name in m) * 1000, 1)
            for name in ("stored", "started", "first_delta", "finished")
            if any(name in m for m in ours)
        },
    }
    result["added_median_ms"] = round(
        result["skillscope"]["median_ms"] - result["bare_sdk"]["median_ms"], 1
    )
    return result


if __name__ == "__main__" and sys.argv[1:2] == ["bare"]:
    print(json.dumps(asyncio.run(bare_ttft(sys.argv[2], int(sys.argv[3])))))
