"""Where a server process spends its CPU under a benchmark's load: py-spy, attached while it runs.

`start_profilers(path, pid)` starts two non-blocking py-spy samplers on the process (py-spy
pauses nothing with `--nonblocking`, so the figures of the run stay comparable): one writes the
flame graph `PATH.svg`, the other the collapsed stacks `PATH.raw`. `finish_profilers` stops
them (SIGINT: py-spy writes its files and exits) and writes `PATH.txt`, the summary by function:
the share of samples a function was running itself ("self") and was on the stack ("total"), and
the same by area (our code, Channels, daphne/Twisted, the SDK, the database, asyncio, ...).

`python -m bench.profile summarise PATH.raw` writes the summary of an existing sample file.
"""

from __future__ import annotations

import collections
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

VENV_BIN = Path(sys.executable).parent
RATE = "97"  # samples per second (not a multiple of the loop's own periods)
_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^():]+?)(?::\d+)?\)$")

# Where a file belongs, first match wins (paths as py-spy prints them, site-packages stripped).
AREAS = [
    ("skills_app/", "skillscope"),
    ("webapp/", "skillscope"),
    ("channels_redis/", "channels-redis"),
    ("redis/", "redis-py"),
    ("channels/", "channels"),
    ("daphne/", "daphne"),
    ("twisted/", "twisted"),
    ("autobahn/", "autobahn"),
    ("txaio/", "autobahn"),
    ("anthropic/", "anthropic SDK"),
    ("httpx/", "httpx"),
    ("httpcore/", "httpx"),
    ("httpx2/", "httpx"),
    ("httpcore2/", "httpx"),
    ("h11/", "httpx"),
    ("aiohttp/", "aiohttp"),
    ("multidict/", "aiohttp"),
    ("yarl/", "aiohttp"),
    ("pydantic", "pydantic"),
    ("django/db/", "django db"),
    ("psycopg", "psycopg"),
    ("sqlite3/", "sqlite"),
    ("django/", "django"),
    ("asgiref/", "asgiref"),
    ("msgpack", "msgpack"),
    ("json/", "json"),
    ("asyncio/", "asyncio"),
    ("selectors.py", "asyncio"),
    ("threading.py", "threads"),
    ("concurrent/", "threads"),
]


def _profiler(pid: int, output: Path, fmt: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            str(VENV_BIN / "py-spy"),
            "record",
            "--pid",
            str(pid),
            "--rate",
            RATE,
            "--nonblocking",
            "--format",
            fmt,
            "--output",
            str(output),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def start_profilers(path: str, server: Any) -> list[tuple[subprocess.Popen[bytes], Path]]:
    """py-spy on `server` (an object with `.process`, or a pid): PATH.svg and PATH.raw."""
    pid = server if isinstance(server, int) else server.process.pid
    base = Path(path).with_suffix("")
    svg, raw = base.with_suffix(".svg"), base.with_suffix(".raw")
    return [(_profiler(pid, svg, "flamegraph"), svg), (_profiler(pid, raw, "raw"), raw)]


def finish_profilers(profilers: list[tuple[subprocess.Popen[bytes], Path]]) -> None:
    """Stop the samplers, wait for their files, and summarise the raw one next to it."""
    for process, _ in profilers:
        process.send_signal(signal.SIGINT)
    for process, output in profilers:
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
        if process.returncode not in (0, -signal.SIGINT) and not output.exists():
            error = (process.stderr.read() if process.stderr else b"").decode()[-2000:]
            print(f"py-spy failed for {output}: {error}", file=sys.stderr)
    for _, output in profilers:
        if output.suffix == ".raw" and output.exists():
            summary = summarise(output.read_text())
            output.with_suffix(".txt").write_text(summary)
            print(summary)


def _area(file: str) -> str:
    for marker, area in AREAS:
        if marker in file:
            return area
    return "other"


def _frame(text: str) -> tuple[str, str]:
    """(function as file:name, area) of one collapsed-stack frame."""
    found = _FRAME.match(text.strip())
    if not found:
        return text.strip(), "other"
    file = found["file"].split("site-packages/")[-1]
    file = re.sub(r"^.*?/(skills_app|webapp|bench|tests)/", r"\1/", file)
    return f"{file}:{found['func']}", _area(file)


def summarise(raw: str, top: int = 40) -> str:
    """The share of samples per function (self and total) and per area, from collapsed stacks."""
    own: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    areas_own: collections.Counter[str] = collections.Counter()
    areas_total: collections.Counter[str] = collections.Counter()
    # The event loop's thread (what delays every frame), apart from the database threads.
    loop_areas: collections.Counter[str] = collections.Counter()
    loop_ours: collections.Counter[str] = collections.Counter()
    loop_samples = 0
    samples = 0
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_frame(part) for part in stack.split(";")]
        # The first frames name the process and thread, not code.
        frames = [f for f in frames if "(" not in f[0] or ":" in f[0]]
        if not frames:
            continue
        samples += count
        leaf, leaf_area = frames[-1]
        own[leaf] += count
        areas_own[leaf_area] += count
        for name in {name for name, _ in frames}:
            total[name] += count
        for area in {area for _, area in frames}:
            areas_total[area] += count
        if "run_forever" in stack:
            loop_samples += count
            loop_areas[leaf_area] += count
            ours = [name for name, area in frames if area == "skillscope"]
            loop_ours[ours[-1] if ours else "(no Skillscope frame: the server, the loop)"] += count
    if not samples:
        return "no samples\n"

    def table(title: str, counter: collections.Counter[str], limit: int, of: int = 0) -> list[str]:
        whole = of or samples
        rows = [f"## {title}", "", "| share | samples | where |", "|---:|---:|---|"]
        for name, count in counter.most_common(limit):
            rows.append(f"| {100 * count / whole:.1f} % | {count} | `{name}` |")
        return [*rows, ""]

    lines = [f"# CPU samples: {samples} ({loop_samples} in the event loop's thread)", ""]
    if loop_samples:
        lines += table("Event loop thread, by area (self)", loop_areas, 20, loop_samples)
        lines += table(
            "Event loop thread, by the innermost Skillscope function on the stack",
            loop_ours,
            25,
            loop_samples,
        )
    lines += table("By area, running itself (self)", areas_own, 30)
    lines += table("By area, on the stack (total)", areas_total, 30)
    lines += table("Functions, self", own, top)
    lines += table("Functions, total", total, top)
    return "\n".join(lines)


if __name__ == "__main__" and sys.argv[1:2] == ["summarise"]:
    print(summarise(Path(sys.argv[2]).read_text()))
