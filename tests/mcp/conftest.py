"""Real MCP servers for the tests: the toy server (SDK's MCPServer) over stdio and HTTP."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from skills_app.mcp.offer import forget_listings
from tests.support.mcp_toy import toy_http_server

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
    with toy_http_server(tmp_path) as url:
        yield url
