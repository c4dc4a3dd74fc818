"""Shared pieces of the live benchmarks: a stamping fake model, daphne, and a websocket client.

Everything listens on 127.0.0.1 only. The fake model is a small asyncio SSE server run in its own
process, so it does not compete with the client for the GIL. The user's message selects what it
streams:
  "fast N C"   - N characters of text in C-character deltas, as fast as possible
  "paced R D"  - R deltas per second for D seconds; each delta is "<send time>" (time.time())
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.frames import parse  # noqa: E402  (plain Python: no Django set-up needed)
from tests.support.migrated_sqlite import copy_database

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
VENV_BIN = Path(sys.executable).parent
STAMP = re.compile(r"<(\d+\.\d+)>")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def fast_text(chars: int) -> str:
    """The deterministic long answer of "fast" mode."""
    words = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "epsilon",
        "zeta",
        "eta",
        "theta",
        "iota",
        "kappa",
        "lambda",
        "mu",
    ]
    out, size, i = [], 0, 0
    while size < chars:
        word = f"{words[i % len(words)]}{i} "
        out.append(word)
        size += len(word)
        i += 1
    return "".join(out)[:chars]


# -- the fake model -----------------------------------------------------------------------------


def _sse(name: str, data: dict[str, Any]) -> bytes:
    payload = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
    return f"{len(payload):x}\r\n".encode() + payload + b"\r\n"


def _last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages", [])):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        texts = [b.get("text", "") for b in content if b.get("type") == "text"]
        if texts:
            return texts[-1]
    return ""


async def _deltas(command: str) -> Any:
    parts = command.split()
    if parts and parts[0] == "paced":
        rate, duration = float(parts[1]), float(parts[2])
        interval, count = 1.0 / rate, int(rate * duration)
        start = time.monotonic()
        for i in range(count):
            delay = start + i * interval - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            yield f"<{time.time():.6f}>"
        return
    chars = int(parts[1]) if len(parts) > 1 else 100_000
    chunk = int(parts[2]) if len(parts) > 2 else 8
    text = fast_text(chars)
    for i in range(0, len(text), chunk):
        yield text[i : i + chunk]


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.decode("latin-1").split("\r\n"):
                if line.lower().startswith("content-length:"):
                    length = int(line.split(":", 1)[1])
            body = json.loads(await reader.readexactly(length) or b"{}")
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"transfer-encoding: chunked\r\ncache-control: no-cache\r\n\r\n"
            )
            start = {
                "type": "message_start",
                "message": {
                    "id": "msg_bench",
                    "type": "message",
                    "role": "assistant",
                    "model": body.get("model", "bench"),
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 1},
                },
            }
            writer.write(_sse("message_start", start))
            writer.write(
                _sse(
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": 0,
                        "content_block": {"type": "text", "text": ""},
                    },
                )
            )
            sent = 0
            async for piece in _deltas(_last_user_text(body)):
                writer.write(
                    _sse(
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": 0,
                            "delta": {"type": "text_delta", "text": piece},
                        },
                    )
                )
                sent += 1
                if sent % 64 == 0 or "<" in piece:
                    await writer.drain()
            writer.write(_sse("content_block_stop", {"type": "content_block_stop", "index": 0}))
            writer.write(
                _sse(
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                        "usage": {"output_tokens": sent},
                    },
                )
            )
            writer.write(_sse("message_stop", {"type": "message_stop"}))
            writer.write(b"0\r\n\r\n")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


def _serve(port: int) -> None:
    async def main() -> None:
        server = await asyncio.start_server(_handle, "127.0.0.1", port, backlog=512)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


class FakeModel:
    """The stamping fake model in a child process."""

    def __init__(self) -> None:
        self.port = free_port()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> FakeModel:
        self._process = subprocess.Popen(
            [str(VENV_BIN / "python"), "-m", "bench.live", "serve", str(self.port)], cwd=REPO
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the fake model did not start")

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    def __exit__(self, *exc: object) -> None:
        assert self._process is not None
        self._process.terminate()
        self._process.wait(5)


# -- daphne -------------------------------------------------------------------------------------

_SETUP = """
import json, django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0, interactive=False)
from django.contrib.auth import get_user_model
from django.contrib.sessions.backends.db import SessionStore
from skills_app.models import Conversation
# No password (its hashing costs a quarter second of CPU): the session below is the way in.
user = get_user_model().objects.create_user("bench")
ids = [Conversation.objects.create(owner=user, title=f"bench {{i}}").pk for i in range({n})]
session = SessionStore()
session["_auth_user_id"] = str(user.pk)
# The backend the settings name: a session naming one they do not list is nobody's.
from django.conf import settings
session["_auth_user_backend"] = settings.AUTHENTICATION_BACKENDS[0]
session["_auth_user_hash"] = user.get_session_auth_hash()
session.create()
print(json.dumps({{"session": session.session_key, "conversations": ids}}))
"""


@dataclass
class Daphne:
    """daphne serving the real app on loopback, with its own temporary var dir."""

    model_url: str
    conversations: int = 1
    env_extra: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    session: str = ""
    conversation_ids: list[int] = field(default_factory=list)
    process: subprocess.Popen[bytes] | None = None
    # A migrated SQLite file copied in as the server's database (migrating then has nothing to do).
    database: Path | None = None

    def env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("DATABASE_URL", "REDIS_URL", "SQLITE_PATH", "WORKSPACE_ROOT")
        }
        env.update(
            DJANGO_SETTINGS_MODULE="webapp.settings",
            SKILLSCOPE_VAR_DIR=self.var_dir,
            ANTHROPIC_API_KEY="sk-bench",
            ANTHROPIC_BASE_URL=self.model_url,
            ANTHROPIC_MAX_RETRIES="0",
            ALLOWED_HOSTS="127.0.0.1,localhost",
            RATE_LIMIT_MESSAGES_PER_MINUTE="100000",
            RATE_LIMIT_CONCURRENT_RUNS="100000",
            DEBUG="false",
            LOG_LEVEL="WARNING",
            RUN_EXECUTOR="inline",
            # A conversation's title is one more model call after its first answer; the
            # benchmarks time the answer, so the fake model is asked for answers only.
            CHAT_TITLE_MODEL="none",
        )
        env.update(self.env_extra)
        return env

    def __enter__(self) -> Daphne:
        self.var_dir = tempfile.mkdtemp(prefix="skillscope-bench-")
        if self.database is not None:
            copy_database(self.database, Path(self.var_dir) / "db.sqlite3")
        done = subprocess.run(
            [str(VENV_BIN / "python"), "-c", _SETUP.format(n=self.conversations)],
            cwd=REPO,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            raise RuntimeError(done.stderr[-3000:])
        data = json.loads(done.stdout.strip().splitlines()[-1])
        self.session, self.conversation_ids = data["session"], data["conversations"]
        self.log = open(Path(self.var_dir) / "daphne.log", "wb")  # noqa: SIM115
        profile = os.environ.get("BENCH_PROFILE_DAPHNE")  # a path: write a cProfile there
        wrap = [str(VENV_BIN / "python"), "-m", "cProfile", "-o", profile] if profile else []
        self.process = subprocess.Popen(
            [
                *wrap,
                str(VENV_BIN / "daphne"),
                "-b",
                "127.0.0.1",
                "-p",
                str(self.port),
                "webapp.asgi:application",
            ],  # fmt: skip
            cwd=REPO,
            env=self.env(),
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/accounts/login/", timeout=2)
                return self
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("daphne did not start: " + Path(self.log.name).read_text()[-2000:])

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.log.close()
        if not os.environ.get("BENCH_KEEP"):
            shutil.rmtree(self.var_dir, ignore_errors=True)

    def cpu_seconds(self) -> float:
        """CPU time daphne used so far (user + system), from /proc."""
        assert self.process is not None
        return cpu_seconds(self.process.pid)

    def rss_kb(self) -> tuple[int, int]:
        """(current RSS, peak RSS) of daphne in kB, from /proc."""
        assert self.process is not None
        values = {}
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith(("VmRSS", "VmHWM")):
                key, value = line.split(":")
                values[key] = int(value.split()[0])
        return values.get("VmRSS", 0), values.get("VmHWM", 0)


# -- the websocket client (autobahn ships with daphne: no extra dependency) ---------------------


class Socket:
    """One browser tab: connects, queues received frames with their arrival time."""

    def __init__(self, port: int, path: str, session: str) -> None:
        self.port, self.path, self.session = port, path, session
        self.frames: asyncio.Queue[tuple[float, dict[str, Any]]] = asyncio.Queue()
        self.opened = asyncio.get_running_loop().create_future()
        self.transport: Any = None
        self.protocol: Any = None

    async def connect(self) -> Socket:
        from autobahn.asyncio.websocket import WebSocketClientFactory, WebSocketClientProtocol

        queue, opened = self.frames, self.opened

        class Protocol(WebSocketClientProtocol):
            def onOpen(self) -> None:  # noqa: N802
                if not opened.done():
                    opened.set_result(True)

            def onMessage(self, payload: bytes, is_binary: bool) -> None:  # noqa: N802
                queue.put_nowait((time.time(), parse(payload)))

            def onClose(self, was_clean: bool, code: Any, reason: Any) -> None:  # noqa: N802
                if not opened.done():
                    opened.set_exception(ConnectionError(f"refused: {code} {reason}"))
                queue.put_nowait((time.time(), {"type": "closed", "code": code}))

        factory = WebSocketClientFactory(
            f"ws://127.0.0.1:{self.port}{self.path}",
            origin=f"http://127.0.0.1:{self.port}",
            headers={"Cookie": f"sessionid={self.session}"},
        )
        factory.protocol = Protocol
        loop = asyncio.get_running_loop()
        self.transport, self.protocol = await loop.create_connection(
            factory, "127.0.0.1", self.port
        )
        await asyncio.wait_for(self.opened, 30)
        return self

    def send(self, frame: dict[str, Any]) -> None:
        """Send an action, as the page's forms do."""
        self.protocol.sendMessage(json.dumps(frame).encode())

    async def receive(self, timeout: float = 60) -> tuple[float, dict[str, Any]]:
        return await asyncio.wait_for(self.frames.get(), timeout)

    async def until(self, frame_type: str, timeout: float = 60) -> list[tuple[float, dict]]:
        got = []
        while True:
            item = await self.receive(timeout)
            got.append(item)
            if item[1].get("type") in (frame_type, "closed"):
                return got

    def close(self) -> None:
        if self.protocol is not None:
            self.protocol.sendClose()


class StreamText:
    """Streamed text as a browser assembles it, with the checks the benchmarks report.

    Offset 0 starts a block; any other piece must start where the block's text ends (a hole or
    a repeat is counted as an error). `new` returns the text a piece added.
    """

    def __init__(self) -> None:
        self.blocks: dict[tuple[Any, ...], int] = {}
        self.errors = 0

    def new(self, frame: dict[str, Any]) -> str:
        key = (frame["run"], frame["call"], frame["index"], frame["type"])
        have = 0 if frame["offset"] == 0 else self.blocks.get(key, 0)
        if frame["offset"] != have:
            self.errors += 1
            return ""
        self.blocks[key] = have + len(frame["text"])
        return str(frame["text"])


def machine() -> dict[str, str]:
    """nproc, RAM and CPU model, for RESULTS.md."""
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "unknown",
    )
    mem_kb = int(Path("/proc/meminfo").read_text().split()[1])
    return {
        "nproc": str(os.cpu_count()),
        "ram": f"{mem_kb / 1024 / 1024:.1f} GiB",
        "cpu": cpu,
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "load": load(),
    }


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load() -> str:
    """The 1-minute load average: the machine is shared, so say how busy it was."""
    return Path("/proc/loadavg").read_text().split()[0]


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


# -- the limit: the bare SDK consuming the same streams in one process --------------------------


async def bare_streams(
    url: str, conversations: int, command: str, timeout: float
) -> dict[str, Any]:
    """`conversations` paced streams consumed at once by the bare SDK: latencies and counts."""
    import anthropic

    latencies: list[float] = []
    counts: list[int] = []
    ordered = True

    # One client for every stream, as a server would keep one; warmed up like the server is.
    client = anthropic.AsyncAnthropic(api_key="sk-bench", base_url=url, max_retries=0)
    async with client.messages.stream(
        model="bench", max_tokens=64000, messages=[{"role": "user", "content": "fast 2000 8"}]
    ) as warm_up:
        await warm_up.get_final_message()

    async def one() -> None:
        nonlocal ordered
        last, count = 0.0, 0
        try:
            async with client.messages.stream(
                model="bench", max_tokens=64000, messages=[{"role": "user", "content": command}]
            ) as stream:
                async for event in stream:
                    if event.type == "content_block_delta" and event.delta.type == "text_delta":
                        arrived = time.time()
                        for stamp in STAMP.findall(event.delta.text):
                            sent = float(stamp)
                            ordered &= sent >= last
                            last = sent
                            latencies.append(arrived - sent)
                            count += 1
        finally:
            counts.append(count)

    await asyncio.wait_for(asyncio.gather(*(one() for _ in range(conversations))), timeout)
    await client.close()
    return {
        "delivered": sum(counts),
        "ordered": ordered,
        "p50_ms": percentile(latencies, 50) * 1000,
        "p99_ms": percentile(latencies, 99) * 1000,
        "max_ms": max(latencies, default=0.0) * 1000,
    }


def run_bare(url: str, conversations: int, command: str, timeout: float) -> dict[str, Any]:
    """`bare_streams` in its own process (as daphne is), its result as a dict."""
    done = subprocess.run(
        [
            str(VENV_BIN / "python"),
            "-m",
            "bench.live",
            "bare",
            url,
            str(conversations),
            command,
            str(timeout),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout + 60,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the bare SDK run failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


if __name__ == "__main__" and sys.argv[1:2] == ["serve"]:
    _serve(int(sys.argv[2]))
elif __name__ == "__main__" and sys.argv[1:2] == ["bare"]:
    _url, _n, _command, _timeout = sys.argv[2:6]
    print(json.dumps(asyncio.run(bare_streams(_url, int(_n), _command, float(_timeout)))))
