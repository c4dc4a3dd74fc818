"""Skillscope past one process: PostgreSQL, Redis, two daphne processes and Channels workers.

A conversation is driven through web process A and watched from web process B while a worker
executes the run; the worker is killed mid-run, the tab sees "interrupted" within seconds, and
the stored history must still be a valid API request. A message sent while no worker runs waits
15 s in the queue (through a web process restart and an emptied Redis) and is answered when
a worker starts. Every process runs with the documented env file (see conftest).
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from tests.multiprocess.conftest import PUBLIC_HOST
from tests.multiprocess.wsclient import WebSocket
from tests.support.fake_anthropic import Reply, validate_request
from tests.support.ws_helpers import Reader

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(300)]

ANSWER = "Streaming across processes works. " * 12
# How long a message waits with no worker running before one starts. The point is that the run
# lives in PostgreSQL, not in Redis: the test empties Redis meanwhile (FLUSHALL), which forgets
# more than the 60 s a Redis channel message lives would, so the wait need not outlast those.
QUEUE_WAIT = float(os.environ.get("SKILLSCOPE_TEST_QUEUE_WAIT", "15"))
# A killed worker's run must show as interrupted in a connected tab within this many seconds.
INTERRUPTED_WITHIN = 5.0


async def _open(
    port: int, conversation: int, session: str, replayed: list[dict[str, Any]] | None = None
) -> WebSocket:
    """A tab on the conversation through web process `port`, resumed from the start (the
    replayed frames go to `replayed`)."""
    ws = await WebSocket.connect(
        "127.0.0.1",
        port,
        f"/ws/conversations/{conversation}/",
        # As nginx passes a browser's websocket on: the public name and its HTTPS origin.
        headers={
            "Host": PUBLIC_HOST,
            "Origin": f"https://{PUBLIC_HOST}",
            "Cookie": f"sessionid={session}",
        },
    )
    await ws.send_json({"action": "resume", "after": 0})
    await _until(ws, lambda f: f.get("type") == "resumed", replayed if replayed is not None else [])
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


async def _ready(deployment: Any, name: str, *, timeout: float = 20) -> None:
    """Wait (bounded) for /readyz to say 200: a busy machine can miss one check's 2 s bound."""
    deadline = time.monotonic() + timeout
    while (answer := deployment.get(name, "/readyz"))[0] != 200:
        assert time.monotonic() < deadline, f"{name} not ready: {answer[2]}"
        await asyncio.sleep(0.5)


def _finished(status: str) -> Callable[[dict[str, Any]], bool]:
    return lambda f: f.get("type") == "run.finished" and f["data"]["status"] == status


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
        assert any(
            f.get("type") == "message.stored" and f["data"]["role"] == "user" for f in seen_b
        )
        runs = deployment.db_tool("state", str(conversation))["runs"]
        assert runs[-1]["status"] == "running"
        assert f"pid {worker.pid}" in runs[-1]["worker"], runs[-1]

        # 2. The worker dies mid-run. No other worker is left: web process B itself notices the
        # silent worker and marks the run interrupted, within seconds.
        killed_at = time.monotonic()
        deployment.kill("worker-1")
        gate.set()
        await _until(ws_b, _finished("interrupted"), seen_b, timeout=30)
        noticed = time.monotonic() - killed_at
        print(f"interrupted shown {noticed:.1f} s after the kill")  # pytest -s shows it
        assert noticed < INTERRUPTED_WITHIN, f"interrupted shown after {noticed:.1f} s"
        errors = [
            f for f in seen_b if f.get("type") == "message.stored" and f["data"]["kind"] == "error"
        ]
        assert errors and errors[-1]["data"]["role"] == "assistant"
        state = deployment.db_tool("state", str(conversation))
        assert [r["status"] for r in state["runs"]] == ["interrupted"]
        assert [(r["role"], r["kind"]) for r in state["rows"]] == [
            ("user", "text"),
            ("assistant", "text"),
            ("assistant", "error"),
        ]
        # The partial answer is kept for the user; the interrupted turn is left out of later
        # requests until Retry (like a failed one).
        assert state["rows"][1]["meta"] == {"partial": True, "excluded": "failed"}
        assert validate_request(state["request"]) is None
        assert state["event_seqs"] == list(range(1, len(state["event_seqs"]) + 1))
        deployment.spawn_worker("worker-2")
        deployment.wait_ready("worker-2")

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
        code, _headers, page = deployment.get("web-b", f"/c/{conversation}/", cookie=session)
        assert code == 200
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


async def test_a_message_sent_with_no_worker_running_is_answered_when_one_starts_later(
    deployment, fake_anthropic
):
    deployment.spawn_web("web-a")
    deployment.spawn_web("web-b")
    user = deployment.db_tool("setup", "nadia")
    deployment.wait_ready("web-a", "web-b")
    conversation, session = user["conversation"], user["session"]
    fake_anthropic.enqueue(Reply.text("Thanks for waiting: here is the answer."))
    ws = await _open(deployment.ports["web-a"], conversation, session)
    try:
        # The user's message is stored and shown at once, with "waiting for a worker".
        sent_at = time.monotonic()
        await ws.send_json({"action": "send", "text": "is anybody there?"})
        seen: list[dict[str, Any]] = []
        await _until(ws, lambda f: f.get("type") == "run.queued", seen)
        shown = [f["data"] for f in seen if f.get("type") == "message.stored"]
        assert [(d["role"], d["kind"]) for d in shown] == [("user", "text")]
        state = deployment.db_tool("state", str(conversation))
        assert [(r["role"], r["text"]) for r in state["rows"]] == [("user", "is anybody there?")]
        assert seen[-1]["data"] == {"run_id": state["runs"][-1]["pk"]}
        code, _, body = deployment.get("web-a", "/readyz")
        assert code == 503 and '"workers": "none alive"' in body

        # The run lives in PostgreSQL, not in a process or in Redis: the web process that took
        # the message dies and Redis forgets everything; the tab reconnects through the other.
        await ws.close()
        deployment.kill("web-a")
        redis.Redis.from_url(deployment.redis_url).flushall()
        replayed: list[dict[str, Any]] = []
        ws = await _open(deployment.ports["web-b"], conversation, session, replayed)
        assert [f["type"] for f in replayed] == ["message.stored", "run.queued", "resumed"]
        code, _, page = deployment.get("web-b", f"/c/{conversation}/", cookie=session)
        assert "is anybody there?" in page and "Waiting for a worker" in page

        # It waits, however long: nothing starts or ends it while no worker runs.
        while (left := QUEUE_WAIT - (time.monotonic() - sent_at)) > 0:
            try:
                frame = await ws.receive_frame(timeout=left)
            except TimeoutError:
                break
            assert frame.get("type") not in ("run.started", "run.finished"), frame
        state = deployment.db_tool("state", str(conversation))
        assert [r["status"] for r in state["runs"]] == ["queued"]
        assert fake_anthropic.requests == []

        deployment.spawn_worker("worker-1")
        deployment.wait_ready("worker-1")
        answered: list[dict[str, Any]] = []
        await _until(ws, _finished("done"), answered, timeout=30)
        assert "Thanks for waiting" in "".join(
            f["text"] for f in answered if f.get("type") == "text.delta"
        )
        await _ready(deployment, "web-b")
    except BaseException:
        print(deployment.all_logs())
        raise
    finally:
        await ws.close()
    assert time.monotonic() - sent_at >= QUEUE_WAIT
    state = deployment.db_tool("state", str(conversation))
    assert [r["status"] for r in state["runs"]] == ["done"]
    assert [(r["role"], r["kind"]) for r in state["rows"]] == [
        ("user", "text"),
        ("assistant", "text"),
    ]
    # The worker logged the claim and the end, with the run's ids, as JSON lines. The end is
    # logged when the run's task is done, after its last event went out: the tab may see
    # run.finished before the line is written.
    run_id = state["runs"][0]["pk"]
    deadline = time.monotonic() + 10
    while True:
        entries = [e for e in deployment.log_entries("worker-1") if e.get("run_id") == run_id]
        if any(" finished run " in e["message"] for e in entries) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.1)
    claimed = [e for e in entries if " claimed run " in e["message"]]
    assert claimed and claimed[0]["conversation_id"] == conversation
    assert claimed[0]["queued_seconds"] >= QUEUE_WAIT
    assert any(" finished run " in e["message"] for e in entries)


async def test_a_worker_stopped_by_systemd_interrupts_its_runs_and_deregisters_at_once(
    deployment, fake_anthropic
):
    deployment.spawn_web("web-a")
    deployment.spawn_worker("worker-1")
    user = deployment.db_tool("setup", "sam")
    deployment.wait_ready("web-a", "worker-1")
    conversation, session = user["conversation"], user["session"]
    gate, reached = threading.Event(), threading.Event()
    fake_anthropic.enqueue(
        Reply.text(ANSWER, chunk=12, wait_for=gate, wait_after_events=10, reached=reached)
    )
    ws = await _open(deployment.ports["web-a"], conversation, session)
    seen: list[dict[str, Any]] = []
    try:
        await ws.send_json({"action": "send", "text": "a long answer please"})
        await _wait_event(reached)
        deployment.kill("worker-1", signal.SIGTERM)  # systemctl stop: SIGTERM, then wait
        await _until(ws, _finished("interrupted"), seen, timeout=15)
    except BaseException:
        print(deployment.all_logs())
        raise
    finally:
        gate.set()
        await ws.close()
    messages = [e["message"] for e in deployment.log_entries("worker-1")]
    assert any(m.endswith("stopped (shut down)") for m in messages), messages[-5:]
    assert deployment.get("web-a", "/readyz")[0] == 503
    state = deployment.db_tool("state", str(conversation))
    assert validate_request(state["request"]) is None


def test_each_queued_run_is_claimed_exactly_once_by_competing_workers(deployment):
    """SKIP LOCKED and the conditional update hold on PostgreSQL with claimers racing."""
    result = deployment.db_tool("claim_race", "racer", "4", "40")
    claimed = [run for runs in result["per_claimer"] for run in runs]
    assert len(claimed) == len(set(claimed)) == 40
    assert result["queued_left"] == 0
    assert sum(1 for runs in result["per_claimer"] if runs) > 1  # they did compete


def test_the_processes_run_with_the_documented_env_file(deployment):
    """The env file as systemd reads it: HTTPS behind the proxy, HSTS, JSON logs."""
    deployment.spawn_web("web-a")
    deployment.wait_ready("web-a")
    code, headers, _ = deployment.get("web-a", "/accounts/login/")
    assert code == 200
    assert headers.get("Strict-Transport-Security", "").startswith("max-age=31536000")
    assert "csrftoken=" in headers["Set-Cookie"] and "Secure" in headers["Set-Cookie"]
    plain = dict(deployment.env)
    assert plain["RUN_EXECUTOR"] == "worker" and plain["LOG_FORMAT"] == "json"
    assert "SECRET_KEY" not in plain  # only the file that holds it, as the guide installs it
