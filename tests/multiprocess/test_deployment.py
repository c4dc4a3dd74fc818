"""Skillscope past one process: PostgreSQL, Redis, two daphne processes and Channels workers.

A conversation is driven through web process A and watched from web process B while a worker
executes the run; the worker is killed mid-run, a new one marks the run interrupted, and the
stored history must still be a valid API request.
"""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

from tests.fake_anthropic import Reply, validate_request
from tests.multiprocess.wsclient import WebSocket
from tests.ws_helpers import Reader

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(240)]

ANSWER = "Streaming across processes works. " * 12


async def _open(port: int, conversation: int, session: str) -> WebSocket:
    ws = await WebSocket.connect(
        "127.0.0.1",
        port,
        f"/ws/conversations/{conversation}/",
        headers={"Origin": f"http://127.0.0.1:{port}", "Cookie": f"sessionid={session}"},
    )
    await ws.send_json({"action": "resume", "after": 0})
    await _until(ws, lambda f: f.get("type") == "resumed", [])
    return ws


async def _until(
    ws: WebSocket,
    predicate: Callable[[dict[str, Any]], bool],
    seen: list[dict[str, Any]],
    *,
    timeout: float = 20,
) -> dict[str, Any]:
    """Read frames into `seen` until one matches; fail with what was seen after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(
                f"no matching frame in {timeout} s; saw {[f.get('type') for f in seen]}"
            )
        try:
            frame = await ws.receive_frame(timeout=left)
        except TimeoutError:
            continue
        seen.append(frame)
        if predicate(frame):
            return frame


def _finished(status: str) -> Callable[[dict[str, Any]], bool]:
    return lambda f: f.get("type") == "run.finished" and f.get("status") == status


async def _wait_event(event: threading.Event, timeout: float = 20) -> None:
    assert await asyncio.get_running_loop().run_in_executor(None, event.wait, timeout), (
        "the fake model never reached its pause"
    )


async def test_a_run_executes_in_a_worker_streams_to_every_web_process_and_survives_its_death(
    deployment, fake_anthropic
):
    for name in ("web-a", "web-b"):
        deployment.spawn_web(name)
    deployment.spawn_worker("worker-1")
    user = deployment.db_tool("setup", "walter")  # while they start
    deployment.wait_ready("web-a", "web-b", "worker-1")
    a, b = deployment.ports["web-a"], deployment.ports["web-b"]
    worker = deployment.processes["worker-1"]
    conversation, session = user["conversation"], user["session"]
    ws_a = await _open(a, conversation, session)
    ws_b = await _open(b, conversation, session)
    try:
        # 1. Sent through A, executed by the worker, streamed to B through Redis.
        gate, reached = threading.Event(), threading.Event()
        fake_anthropic.enqueue(
            Reply.text(ANSWER, chunk=12, wait_for=gate, wait_after_events=14, reached=reached)
        )
        await ws_a.send_json({"action": "send", "text": "hello from A"})
        seen_b: list[dict[str, Any]] = []
        await _until(ws_b, lambda f: f.get("type") == "run.started", seen_b)
        await _wait_event(reached)
        await _until(ws_b, lambda f: f.get("type") == "text.delta", seen_b)
        await asyncio.sleep(0.5)  # the deltas streamed before the pause reach B
        while True:
            try:
                seen_b.append(await ws_b.receive_frame(timeout=0.5))
            except TimeoutError:
                break
        streamed = Reader().apply(seen_b).text()
        assert streamed and ANSWER.startswith(streamed), streamed
        assert any(f.get("type") == "message.stored" and "row-user" in f["html"] for f in seen_b)
        runs = deployment.db_tool("state", str(conversation))["runs"]
        assert runs[-1]["status"] == "running"
        assert f"pid {worker.pid}" in runs[-1]["worker"], runs[-1]

        # 2. The worker dies mid-run; a new worker finds the stale heartbeat and interrupts it.
        deployment.kill("worker-1")
        gate.set()
        deployment.spawn_worker("worker-2")
        deployment.wait_ready("worker-2")
        await _until(ws_b, _finished("interrupted"), seen_b, timeout=30)
        errors = [
            f
            for f in seen_b
            if f.get("type") == "message.stored" and 'data-kind="error"' in f["html"]
        ]
        assert errors and "Retry" in errors[-1]["html"]
        state = deployment.db_tool("state", str(conversation))
        assert [r["status"] for r in state["runs"]] == ["interrupted"]
        assert [(r["role"], r["kind"]) for r in state["rows"]] == [
            ("user", "text"),
            ("assistant", "text"),
            ("assistant", "error"),
        ]
        assert state["rows"][1]["meta"] == {"partial": True}
        assert validate_request(state["request"]) is None
        assert state["event_seqs"] == list(range(1, len(state["event_seqs"]) + 1))

        # 3. Retry from B: the new worker continues the conversation; A sees the answer.
        fake_anthropic.enqueue(Reply.text("Back on track."))
        await ws_b.send_json({"action": "retry"})
        seen_a: list[dict[str, Any]] = []
        await _until(ws_a, _finished("done"), seen_a, timeout=30)
        assert fake_anthropic.requests[-1].status == 200
        assert "Back on track." in Reader().apply(seen_a).text()

        # 4. Stop from B a run the worker executes: the stop crosses processes.
        gate, reached = threading.Event(), threading.Event()
        fake_anthropic.enqueue(
            Reply.text(ANSWER, chunk=12, wait_for=gate, wait_after_events=8, reached=reached)
        )
        await ws_a.send_json({"action": "send", "text": "a long one please"})
        await _wait_event(reached)
        try:
            await ws_b.send_json({"action": "stop"})
            await _until(ws_a, _finished("stopped"), seen_a, timeout=20)
        finally:
            gate.set()
        state = deployment.db_tool("state", str(conversation))
        assert [r["status"] for r in state["runs"]] == ["interrupted", "done", "stopped"]
        assert validate_request(state["request"]) is None

        # 5. Plain HTTP through the other process shows the stored transcript.
        request = urllib.request.Request(
            f"http://127.0.0.1:{b}/c/{conversation}/", headers={"Cookie": f"sessionid={session}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            page = response.read().decode()
        assert "Back on track." in page and "hello from A" in page
    except BaseException:
        print(deployment.all_logs())
        raise
    finally:
        await ws_a.close()
        await ws_b.close()


def test_event_and_message_numbers_stay_gap_free_under_concurrent_writers(deployment):
    """The F() counter and the row lock hold on PostgreSQL with several connections writing at once."""
    result = deployment.db_tool("hammer", "hammer", "4", "40")
    assert result["event_seqs"] == list(range(1, 4 * 40 + 1))
    assert result["message_seqs"] == list(range(1, 4 * 8 + 1))
