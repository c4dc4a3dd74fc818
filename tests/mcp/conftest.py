"""Real MCP servers for the tests: the toy server (SDK's MCPServer) over stdio and HTTP."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
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


# tryfirst, as in tests/conftest.py: pytest-xdist reads the xdist_group marks in its own hook.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist the tests of the shared toy HTTP server stay on one worker, so it is
    started once in a run rather than once per worker."""
    for item in items:
        if "http_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("mcp-http"))


@pytest.fixture(autouse=True)
def _fresh_listings():
    forget_listings()
    yield
    forget_listings()


@dataclass(frozen=True)
class ToyHttp:
    """The toy server on Streamable HTTP: its URL, and its working directory (where its
    `touch_marker` writes and its `read_text` reads relative paths)."""

    url: str
    folder: Path


@pytest.fixture(scope="session")
def _toy_http_process(tmp_path_factory):
    """One toy HTTP server for every test that needs one (starting one costs a Python
    interpreter importing the SDK and uvicorn: about a second and a half of CPU)."""
    folder = tmp_path_factory.mktemp("toy-http")
    with toy_http_server(folder) as url:
        yield ToyHttp(url, folder)


@pytest.fixture
def http_server(_toy_http_process):
    """The shared toy HTTP server, its working directory emptied for this test (so a file an
    earlier test had it write is never taken for this test's)."""
    for entry in _toy_http_process.folder.iterdir():
        entry.unlink()  # the toy server writes files only
    return _toy_http_process
