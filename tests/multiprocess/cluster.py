"""The fault tests' cluster: PostgreSQL, a Redis that can be restarted, two daphne web processes
and two Channels workers, started as the units start them, with bench/live.py's fake model.

Shared by the fault suite (a websocket client as chat.js behaves) and the browser fault test
(real Chromium): each module starts its own with `running_cluster`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.live import FakeModel
from tests.multiprocess.conftest import (
    START_TIMEOUT,
    Deployment,
    Postgres,
    documented_environment,
    free_port,
    wait_for_port,
)

WEBS = ("web-a", "web-b")
WORKERS = ("worker-1", "worker-2")


class Redis:
    """A redis-server that can be stopped and started again on the same port."""

    def __init__(self, logs: Path) -> None:
        binary = shutil.which("redis-server")
        assert binary is not None
        self.binary, self.port, self.logs = binary, free_port(), logs
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        wait_for_port(self.port, START_TIMEOUT, process=self.process)

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(10)
            self.process = None


class Cluster:
    """The module's deployment, with its Redis, PostgreSQL and the fake model."""

    def __init__(self, deployment: Deployment, redis: Redis, postgres: Postgres) -> None:
        self.deployment, self.redis, self.postgres = deployment, redis, postgres
        self.pids: dict[str, int] = {}

    def start(self, *names: str, same_port: bool = False) -> None:
        """Start these processes (`same_port`: a web process comes back where it was)."""
        for name in names:
            if name.startswith("web"):
                port = self.deployment.ports.get(name) if same_port else None
                self.deployment.spawn_web(name, port=port)
            else:
                self.deployment.spawn_worker(name)
        self.deployment.wait_ready(*names)
        for name in names:
            self.pids[name] = self.deployment.processes[name].pid

    def all_running(self) -> dict[str, bool]:
        """Whether each process of the cluster is the same one, still running."""
        return {
            name: name in self.deployment.processes
            and self.deployment.processes[name].poll() is None
            and self.deployment.processes[name].pid == pid
            for name, pid in self.pids.items()
        }

    def port(self, web: str) -> int:
        return self.deployment.ports[web]

    def user(self, name: str) -> tuple[int, str]:
        data = self.deployment.db_tool("setup", name)
        return data["conversation"], data["session"]

    def state(self, conversation: int) -> dict[str, Any]:
        return self.deployment.db_tool("state", str(conversation))


@contextlib.contextmanager
def running_cluster(
    postgres: Postgres, static_root: Path, base: Path, *, access_logs: bool = False, **settings: str
) -> Iterator[Cluster]:
    """A started cluster on a migrated PostgreSQL; `settings` replace documented values
    (`access_logs`: see `Deployment.access_logs`)."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed: ./scripts/test.sh installs it")
    logs = base / "logs"
    logs.mkdir()
    redis = Redis(logs)
    redis.start()
    try:
        with FakeModel() as model:
            env = documented_environment(
                base,
                DATABASE_URL=postgres.url,
                REDIS_URL=redis.url,
                STATIC_ROOT=str(static_root),
                ANTHROPIC_BASE_URL=model.url,
                ANTHROPIC_MAX_RETRIES="0",
                ANTHROPIC_THINKING="false",
                CHAT_TITLE_MODEL="none",
                **settings,
            )
            # INFO: the fixtures know a worker is ready by the line it logs when it starts.
            env["LOG_LEVEL"] = "INFO"
            # MULTIPROCESS_ENV='{"NAME": "VALUE"}' runs the cluster with other settings, e.g.
            # another channel layer (bench/layer_settings.py).
            env.update(json.loads(os.environ.get("MULTIPROCESS_ENV") or "{}"))
            deployment = Deployment(
                env=env, logs=logs, redis_url=redis.url, access_logs=access_logs
            )
            cluster = Cluster(deployment, redis, postgres)
            try:
                cluster.start(*WEBS, *WORKERS)
                yield cluster
            finally:
                deployment.stop_all()
    finally:
        redis.stop()
