"""Database connections on PostgreSQL: kept by the threads that live long, replaced after the
server ended them, and closed with the HTTP request whose thread opened them
(tests/support/connection_probe.py, in a process of its own against the tests' server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.multiprocess.conftest import ROOT

pytestmark = pytest.mark.multiprocess


def test_connections_are_kept_replaced_after_the_server_ended_them_and_closed_with_requests(
    migrated, tmp_path
):
    env = {**os.environ, "DATABASE_URL": migrated.url, "SKILLSCOPE_VAR_DIR": str(tmp_path)}
    env.pop("REDIS_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.connection_probe", "--kill", "--requests", "50"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "shared_thread": {"kept": True, "replaced": True},
        "database_thread": {"kept": True, "replaced": True},
        "threads_opened": 4,  # one each, and one each after the server ended the first
        "statuses": [302],  # the session was read: no such session, to the sign-in page
        "http_opened": 50,
        "left_open": 0,
    }
