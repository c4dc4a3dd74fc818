"""Real MCP servers for the tests: the toy server (SDK's MCPServer) over stdio and HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from skills_app.mcp.offer import forget_listings

HERE = Path(__file__).resolve().parent
SERVER = HERE / "toy_server.py"
# The interpreter by its venv path (so the server finds the SDK), and the folders it needs
# bound read-only in the sandbox: the venv, the base Python it links to, this folder.
VENV = os.path.realpath(sys.prefix)
PYTHON = f"{VENV}/bin/python"
READ_ONLY = sorted({VENV, os.path.realpath(sys.base_prefix), str(HERE)})


def stdio_argv(*extra: str) -> list[str]:
    return [PYTHON, str(SERVER), "stdio", *extra]


@pytest.fixture(autouse=True)
def _fresh_listings():
    forget_listings()
    yield
    forget_listings()


@pytest.fixture
def http_server(tmp_path):
    """The toy server on Streamable HTTP on a free loopback port; yields its URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "http", "--port", str(port)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
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
