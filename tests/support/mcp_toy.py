"""The toy MCP server of tests/mcp/toy_server.py served over Streamable HTTP on a free port."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TOY_SERVER = Path(__file__).resolve().parents[1] / "mcp" / "toy_server.py"


@contextmanager
def toy_http_server(cwd: Path, timeout: float = 60.0, *extra: str) -> Iterator[str]:
    """Run the toy server on a free loopback port while the block runs; yields its URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, str(TOY_SERVER), "http", "--port", str(port), *extra],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        else:
            raise AssertionError("the toy HTTP server did not start")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)
