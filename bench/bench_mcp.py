"""MCP over Streamable HTTP on loopback: tool listings per turn, and one call's overhead (not a test).

Run: nice -n 19 .venv/bin/python bench/bench_mcp.py [--turns 20] [--calls 300] [--ttl 2]
     (DATABASE_URL=postgres://... to measure PostgreSQL; default: SQLite in a temp folder)

Starts the tests' toy MCP server (tests/mcp/toy_server.py, the SDK's MCPServer) on a free
loopback port behind a small ASGI counter that tallies every HTTP request it gets by verb and
JSON-RPC method (read back from GET /bench-counts, which the counter answers itself). Then, in a
throw-away SKILLSCOPE_VAR_DIR, registers it the way an admin does (`manage.py mcp add`, `mcp
test`, `mcp review --approve --hash` by a second person, an allow rule `mcp__toy__echo`), and measures:

1. Round trips to list tools per turn: `skills_app.mcp.offer.offered_tools` (what a run calls
   to build its tool list) for --turns turns with MCP_LIST_CACHE_SECONDS=--ttl, the server's
   requests counted per turn; then again once the cache time has passed. Target (issue 39):
   0 list round trips on every turn after the first, within the cache time.
2. One call's overhead, --calls calls interleaved one for one, same server, same run:
   - "sdk": `ClientSession.call_tool("echo")` on one session opened beforehand (the SDK alone);
   - "skillscope": what a run does for `mcp__toy__echo`: `PermissionGate.decide` (the rules,
     the outbound filter `leaves` as a run has it, `runs.factory.mcp_leaves`: hidden text,
     stored secrets, the calls-per-minute quota; the decision's audit row), then `McpTool.run`
     (input check, `core.mcp.connect.call_tool`, mask, cap, the `mcp.called` audit row);
   - its parts, timed in the same loop: the gate alone, the `mcp.called` audit row alone, and
     `connect.call_tool` alone on the loop's kept session (MCP_SESSION_IDLE_SECONDS, as a run
     does), and `connect.call_tool` with a new session per call (keep_alive 0: initialize, the
     SDK's own tools/list before a first call_tool, the call, DELETE), for the comparison.
   Prints p50/p90/p95/p99 of each, the server's requests per call, this process's CPU per call
   (all its threads: the server is another process; on a busy machine the latencies are mostly
   waiting for a CPU, the CPU is not), and skillscope − sdk at p50 and p95 (target: ≤ 5 ms at
   p50).
The server's requests are read between timed calls, never inside one.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOY_DIR = ROOT / "tests" / "mcp"
COUNTS_PATH = "/bench-counts"
TARGET_OVERHEAD_MS = 5.0


# --- the counted server (run as a child process: `bench_mcp.py serve --port N`) ---------------


def serve(port: int) -> None:
    """The toy server's Streamable HTTP app behind a request counter, on 127.0.0.1:port."""
    import uvicorn

    sys.path.insert(0, str(TOY_DIR))
    from toy_server import build  # the tests' toy server, unchanged

    app = build("Repeat the text back.").streamable_http_app()
    counts: Counter[str] = Counter()

    async def counted(scope, receive, send):  # an ASGI middleware: counts, then passes on
        if scope["type"] != "http":
            return await app(scope, receive, send)
        if scope["path"] == COUNTS_PATH:
            body = json.dumps(counts).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            return await send({"type": "http.response.body", "body": body})
        verb = scope["method"]
        if verb != "POST":
            counts[verb] += 1
            return await app(scope, receive, send)
        chunks: list[bytes] = []

        async def reading():
            message = await receive()
            if message["type"] == "http.request":
                chunks.append(message.get("body", b""))
                if not message.get("more_body"):
                    counts[f"POST {_rpc_method(b''.join(chunks))}"] += 1
            return message

        return await app(scope, reading, send)

    uvicorn.run(counted, host="127.0.0.1", port=port, log_level="warning")


def _rpc_method(body: bytes) -> str:
    try:
        message = json.loads(body)
    except ValueError:
        return "?"
    if isinstance(message, list):
        return "+".join(str(m.get("method", "response")) for m in message)
    return str(message.get("method", "response"))


# --- the measurements -------------------------------------------------------------------------


def start_server() -> tuple[subprocess.Popen[bytes], str, int]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, __file__, "serve", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process, f"http://127.0.0.1:{port}/mcp", port
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise SystemExit("the toy MCP server did not start")


def server_counts(port: int) -> Counter[str]:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}{COUNTS_PATH}", timeout=5) as answer:
        return Counter(json.loads(answer.read()))


def diff(after: Counter[str], before: Counter[str]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in sorted(after) if after[k] != before[k]}


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] * 1000


def line(label: str, samples: list[float]) -> str:
    return (
        f"{label:<44} p50 {pct(samples, 0.5):7.2f}  p90 {pct(samples, 0.9):7.2f}  "
        f"p95 {pct(samples, 0.95):7.2f}  p99 {pct(samples, 0.99):7.2f}  max {max(samples) * 1000:7.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--ttl", type=float, default=2.0, help="MCP_LIST_CACHE_SECONDS")
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    var_dir = tempfile.mkdtemp(prefix="skillscope-bench-mcp-")
    atexit.register(shutil.rmtree, var_dir, ignore_errors=True)
    os.environ["SKILLSCOPE_VAR_DIR"] = var_dir
    for name in ("REDIS_URL", "SQLITE_PATH"):
        os.environ.pop(name, None)
    import django

    django.setup()
    import logging

    logging.disable(logging.INFO)  # httpx2 and the SDK log every request at INFO
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    print(f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC; {platform.node()}")
    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, nice "
        f"{os.nice(0)}; load average before: {os.getloadavg()}"
    )
    process, url, port = start_server()
    atexit.register(process.wait, 10)
    atexit.register(process.terminate)
    started = time.perf_counter()
    setup = register(url, call_command)
    print(
        f"{connection.vendor}; {url}; registered, tested, reviewed, allowed in "
        f"{time.perf_counter() - started:.1f} s; server requests so far: {dict(server_counts(port))}"
    )
    settings.MCP_LIST_CACHE_SECONDS = args.ttl
    asyncio.run(listings(setup, port, args.turns, args.ttl))
    # The quota is checked at every call as in a run (one query), and never reached here.
    settings.MCP_CALLS_PER_MINUTE = 1_000_000
    asyncio.run(overhead(setup, url, port, args.calls))
    print(f"load average after: {os.getloadavg()}")


def register(url: str, call_command):
    """As an admin does it: add, test (the first listing), review by another person, a rule."""
    from django.contrib.auth import get_user_model

    from skills_app.core.tools import ToolContext
    from skills_app.models import Conversation, McpToolDefinition, PermissionRule, Run
    from skills_app.workspaces import workspace_for

    people = get_user_model().objects
    call_command("migrate", verbosity=0, interactive=False)
    alice = people.create_user("alice", password="alice-pass-123")
    people.create_user("bob", password="bob-pass-123")
    quiet = open(os.devnull, "w")  # noqa: SIM115 (kept for the process's life)
    call_command("mcp", "add", "toy", "--as", "alice", "--everyone", "--url", url, stdout=quiet)
    call_command("mcp", "test", "toy", stdout=quiet)
    echo = McpToolDefinition.objects.get(server__name="toy", tool="echo", current=True)
    call_command("mcp", "review", "toy", "--approve", "--hash", echo.content_hash, "--as", "bob",
                 stdout=quiet)  # fmt: skip
    PermissionRule.objects.create(behavior="allow", rule_text="mcp__toy__echo")
    conversation = Conversation.objects.create(owner=alice, title="bench")
    run = Run.objects.create(conversation=conversation, status=Run.RUNNING, started_by=alice)
    workspace = workspace_for(conversation.pk)
    return {
        "user": alice,
        "conversation": conversation,
        "run": run,
        "workspace": workspace,
        "ctx": ToolContext(workspace=workspace, sandbox="auto"),
    }


def place_of(setup):
    from skills_app.core.mcp.connect import Place

    ws = setup["workspace"]
    return Place(root=ws.root, skills_dir=ws.skills_dir)


async def listings(setup, port: int, turns: int, ttl: float) -> None:
    from skills_app.mcp import offer

    offer.forget_listings()
    place = place_of(setup)

    async def turn() -> tuple[float, dict[str, int], int, int]:
        before, lists = await asyncio.to_thread(server_counts, port), offer.listing_count
        began = time.perf_counter()
        found = await offer.offered_tools(group_ids=frozenset(), place=place, record=None)
        took = time.perf_counter() - began
        after = await asyncio.to_thread(server_counts, port)
        return took, diff(after, before), offer.listing_count - lists, len(found.tools)

    print(f"\n1. Tool listings per turn: {turns} turns, MCP_LIST_CACHE_SECONDS={ttl:g}")
    first = time.monotonic()
    rows = [await turn() for _ in range(turns)]
    within = time.monotonic() - first
    for n, (took, requests, _lists, tools) in enumerate(rows, 1):
        if n <= 3 or n == turns or requests:
            print(
                f"  turn {n:>3}: {took * 1000:7.2f} ms, {tools} tool(s) offered, "
                f"tools/list {requests.get('POST tools/list', 0)}, all requests {requests}"
            )
    later = rows[1:]
    print(
        f"  turns 2..{turns} (all within {within:.2f} s of the first): tools/list "
        f"{sum(r[1].get('POST tools/list', 0) for r in later)}, server requests "
        f"{sum(sum(r[1].values()) for r in later)}, listings made {sum(r[2] for r in later)}; "
        f"p50 {statistics.median(r[0] for r in later) * 1000:.2f} ms a turn (database only)"
    )
    # Past the cache time: the next turn lists again, once, and the turns after it do not.
    await asyncio.sleep(max(0.0, ttl - (time.monotonic() - first)) + 0.2)
    after = [await turn() for _ in range(3)]
    for n, (took, requests, _lists, _tools) in enumerate(after, 1):
        print(
            f"  after {ttl:g} s, turn {n}: {took * 1000:7.2f} ms, tools/list "
            f"{requests.get('POST tools/list', 0)}, all requests {requests}"
        )


async def overhead(setup, url: str, port: int, calls: int) -> None:
    import dataclasses

    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    from skills_app.core.agent import TurnState
    from skills_app.core.mcp import CallRecord
    from skills_app.core.mcp.connect import call_tool, kept_sessions
    from skills_app.core.permissions import ToolCall
    from skills_app.mcp import offer
    from skills_app.models import AuditEvent, PermissionDecision
    from skills_app.permissions.approvals import PermissionGate
    from skills_app.runs.factory import mcp_leaves
    from skills_app.visibility import mcp_call_preview

    conversation, run, user = setup["conversation"], setup["run"], setup["user"]

    async def record(*_args, **_kwargs) -> int:
        return 0

    gate = PermissionGate(
        conversation_id=conversation.pk,
        run_id=run.pk,
        user_id=user.pk,
        workspace=setup["workspace"],
        record=record,
        # As a run's gate has it (`runs.factory`): hidden text, stored secrets, another person's
        # words, the quota.
        leaves=mcp_leaves(conversation.pk, user.pk),
        kept=lambda call: ToolCall(
            call.tool, mcp_call_preview(conversation.pk, call.tool, dict(call.input))
        ),
    )
    recorder = offer.call_recorder(
        user_id=user.pk,
        conversation_id=conversation.pk,
        run_id=run.pk,
        preview=lambda tool, value: mcp_call_preview(conversation.pk, tool, value),
    )
    found = await offer.offered_tools(group_ids=frozenset(), place=place_of(setup), record=recorder)
    (tool,) = [t for t in found.tools if t.name == "mcp__toy__echo"]
    ctx, place, state = setup["ctx"], place_of(setup), TurnState()
    arguments = {"text": "hello from the bench"}

    async def skillscope() -> None:
        decision = await gate.decide(ToolCall(tool.name, arguments), state)
        assert decision.behavior == "allow", decision
        result = await tool.run(arguments, ctx)
        assert not result.is_error and "echo: hello" in result.content, result.content

    async def gate_only() -> None:
        decision = await gate.decide(ToolCall(tool.name, arguments), state)
        assert decision.behavior == "allow", decision

    async def record_only() -> None:
        await recorder(CallRecord("toy", "echo", tool.definition_hash, False, 8, 26, False))

    async def connect_only() -> None:
        outcome = await call_tool(tool.spec, place, "echo", arguments)
        assert outcome.text == "echo: hello from the bench", outcome

    fresh_spec = dataclasses.replace(tool.spec, keep_alive=0.0)

    async def connect_fresh() -> None:
        outcome = await call_tool(fresh_spec, place, "echo", arguments)
        assert outcome.text == "echo: hello from the bench", outcome

    timeout = httpx2.Timeout(10.0, read=75.0)
    async with (
        httpx2.AsyncClient(timeout=timeout) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()

        async def sdk() -> None:
            result = await session.call_tool("echo", arguments)
            assert result.content[0].text == "echo: hello from the bench"

        ways = {"sdk": sdk, "skillscope": skillscope, "gate": gate_only,
                "record": record_only, "connect": connect_only,
                "fresh": connect_fresh}  # fmt: skip
        for way in ways.values():  # warm up each path
            await way()
        times: dict[str, list[float]] = {name: [] for name in ways}
        cpu: dict[str, list[float]] = {name: [] for name in ways}
        requests: dict[str, Counter[str]] = {name: Counter() for name in ways}
        audit_before = await AuditEvent.objects.acount()
        decisions_before = await PermissionDecision.objects.acount()
        for _ in range(calls):
            for name, way in ways.items():
                before = await asyncio.to_thread(server_counts, port)
                began, began_cpu = time.perf_counter(), time.process_time()
                await way()
                times[name].append(time.perf_counter() - began)
                cpu[name].append(time.process_time() - began_cpu)
                after = await asyncio.to_thread(server_counts, port)
                requests[name].update(diff(after, before))
        kept = await kept_sessions()
        audit_rows = await AuditEvent.objects.acount() - audit_before
        decision_rows = await PermissionDecision.objects.acount() - decisions_before

    print(f"\n2. One call of echo, {calls} calls of each, interleaved (ms)")
    labels = {
        "sdk": "SDK call_tool, one open session",
        "skillscope": "Skillscope: gate.decide + McpTool.run",
        "gate": "  its part: gate.decide alone",
        "record": "  its part: the mcp.called audit row alone",
        "connect": "  its part: connect.call_tool, kept session",
        "fresh": "  (connect.call_tool, a new session per call)",
    }
    for name, label in labels.items():
        print("  " + line(label, times[name]))
        per_call = {k: round(v / calls, 2) for k, v in sorted(requests[name].items())}
        print(
            f"  {'':<44} server requests per call: {per_call}; this process's CPU per call: "
            f"mean {statistics.fmean(cpu[name]) * 1000:.2f} ms, p50 {pct(cpu[name], 0.5):.2f} ms"
        )
    gap = pct(times["skillscope"], 0.5) - pct(times["sdk"], 0.5)
    gap95 = pct(times["skillscope"], 0.95) - pct(times["sdk"], 0.95)
    verdict = "PASS" if gap <= TARGET_OVERHEAD_MS else "MISS"
    print(
        f"  overhead at p50: skillscope − sdk = {gap:.2f} ms (target ≤ "
        f"{TARGET_OVERHEAD_MS:g} ms): {verdict}; at p95: {gap95:.2f} ms"
    )
    cpu_gap = statistics.fmean(cpu["skillscope"]) - statistics.fmean(cpu["sdk"])
    print(
        f"  CPU (this process, all its threads; the server is another process): skillscope − "
        f"sdk = {cpu_gap * 1000:.2f} ms a call on average"
    )
    parts = pct(times["gate"], 0.5) + pct(times["record"], 0.5)
    transport = pct(times["connect"], 0.5) - pct(times["sdk"], 0.5)
    print(
        f"  of which gate + audit row at p50 = {parts:.2f} ms; connect.call_tool on the kept "
        f"session − sdk at p50 = {transport:.2f} ms; sessions kept open at the end: {kept}"
    )
    print(
        f"  rows written over the loop: {audit_rows} AuditEvent (mcp.called: McpTool.run and "
        f"the audit row alone), {decision_rows} PermissionDecision (gate.decide: skillscope and "
        "gate alone)"
    )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        serve(int(sys.argv[sys.argv.index("--port") + 1]))
    else:
        main()
