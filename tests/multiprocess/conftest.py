"""Real PostgreSQL, Redis, daphne and `runworker` processes on loopback, for the multi-process tests.

The processes get the environment systemd would build from the documented env file
(`deploy/skillscope.env`, read by `webapp.envfile`), with only this machine's addresses and paths
replaced, and are reached the way nginx reaches them (Host and X-Forwarded-Proto headers).

Every wait is bounded, and every process started here is killed at teardown, also on failure.
As root, PostgreSQL runs as the `postgres` user (it refuses to run as root).
"""

from __future__ import annotations

import glob
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.django_host import DjangoHost, DjangoHostError

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 40.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(
    port: int, timeout: float, *, process: subprocess.Popen[Any] | None = None
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the process exited with {process.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing listens on port {port} after {timeout} s")


def _pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


@dataclass(slots=True)
class Postgres:
    url: str
    port: int
    # What the fault tests need to stop and start the server (and the restore test, its tools).
    bindir: Path = Path("/")
    data: Path = Path("/")
    base: Path = Path("/")
    as_postgres: list[str] = field(default_factory=list)

    def ctl(self, *args: str, timeout: float = 60) -> None:
        subprocess.run(
            [*self.as_postgres, str(self.bindir / "pg_ctl"), "-D", str(self.data), *args],
            check=True,
            capture_output=True,
            timeout=timeout,
        )

    def stop(self) -> None:
        """Stop the server as `systemctl stop postgresql` does (fast: connections are ended)."""
        self.ctl("-m", "fast", "-w", "-t", "30", "stop")

    def start(self) -> None:
        self.ctl("-l", str(self.base / "server.log"), "-o", self.options, "-w", "-t", "30", "start")

    @property
    def options(self) -> str:
        return (
            f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off"
        )

    def tool(self, name: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run one of PostgreSQL's client programs (pg_dump, createdb, ...) against the server."""
        return subprocess.run(
            [
                str(self.bindir / name),
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                "postgres",
                *args,
            ],
            check=True,
            capture_output=True,
            text=True,
            timeout=timeout,
        )


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """A throw-away PostgreSQL cluster with a `skillscope` database."""
    bindir = _pg_bin()
    if bindir is None:
        pytest.skip("PostgreSQL is not installed: ./scripts/test.sh installs it (apt postgresql)")
    base = Path(tempfile.mkdtemp(prefix="skillscope-pg-"))
    as_postgres: list[str] = []
    if os.geteuid() == 0:
        # PostgreSQL will not run as root: hand the cluster to the postgres user.
        shutil.chown(base, "postgres", "postgres")
        as_postgres = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    data = base / "data"

    def run(*args: str, timeout: float = 60) -> None:
        subprocess.run([*as_postgres, *args], check=True, capture_output=True, timeout=timeout)

    try:
        run(
            str(bindir / "initdb"),
            "-D",
            str(data),
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--no-sync",
        )
        server = Postgres(
            url=f"postgres://postgres@127.0.0.1:{port}/skillscope",
            port=port,
            bindir=bindir,
            data=data,
            base=base,
            as_postgres=as_postgres,
        )
        server.start()
        run(
            str(bindir / "createdb"),
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
            "-U",
            "postgres",
            "skillscope",
        )
        yield server
    except subprocess.CalledProcessError as exc:
        log = base / "server.log"
        detail = log.read_text()[-2000:] if log.exists() else ""
        raise RuntimeError(
            f"{exc.cmd[-1]} failed: {exc.stderr.decode()[-2000:]}\n{detail}"
        ) from exc
    finally:
        subprocess.run(
            [
                *as_postgres,
                str(bindir / "pg_ctl"),
                "-D",
                str(data),
                "-m",
                "immediate",
                "-w",
                "stop",
            ],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def migrated(postgres: Postgres, tmp_path_factory: pytest.TempPathFactory) -> Postgres:
    """The PostgreSQL database with Skillscope's tables (migrated once for the session)."""
    env = {
        **os.environ,
        "DATABASE_URL": postgres.url,
        "SKILLSCOPE_VAR_DIR": str(tmp_path_factory.mktemp("migrate-var")),
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "--verbosity", "0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if result.returncode != 0:
        raise RuntimeError(f"migrate failed against PostgreSQL:\n{result.stderr[-3000:]}")
    return postgres


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A throw-away redis-server on a free loopback port, without persistence."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip(
            "redis-server is not installed: ./scripts/test.sh installs it (apt redis-server)"
        )
    port = free_port()
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for_port(port, START_TIMEOUT, process=process)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.kill()
        process.wait(timeout=10)


@dataclass
class Deployment:
    """Skillscope's processes against one PostgreSQL and one Redis, like a small production."""

    env: dict[str, str]
    logs: Path
    redis_url: str = ""
    processes: dict[str, subprocess.Popen[Any]] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    host: DjangoHost | None = None
    # Web processes write daphne's access log to logs/<name>-access.log (the unit sends it to
    # /dev/null): which process holds which websocket, when nginx chose it.
    access_logs: bool = False

    def db_tool(self, *args: str) -> Any:
        """Run a tests/multiprocess/db_tool.py command against the deployment's database; its
        JSON answer. One process with Django set up serves every call with the same environment
        (a process per call cost 1.5 s of CPU each)."""
        if self.host is None or self.host.env != self.env:
            self.close_host()
            self.host = DjangoHost(self.env, ROOT)
        script = (
            "from tests.multiprocess import db_tool\n"
            f"print(json.dumps(db_tool.run({list(args)!r}), default=str))"
        )
        try:
            return json.loads(self.host.run("import json\n" + script))
        except DjangoHostError as error:
            raise RuntimeError(f"db_tool {' '.join(args)} failed:\n{error}") from None

    def close_host(self) -> None:
        if self.host is not None:
            self.host.close()
            self.host = None

    def spawn_web(self, name: str, *, port: int | None = None) -> None:
        """Start a daphne process on `port` or a free one, as the web unit does (then `wait_ready`)."""
        port = port or free_port()
        command = [sys.executable, "-m", "daphne", "--bind", "127.0.0.1", "--port", str(port)]
        access = "/dev/null"
        if self.access_logs:
            access = str(self.logs / f"{name}-access.log")
            Path(access).write_text("")  # a new process, a new log
        unit_flags = ["--proxy-headers", "--no-server-name", "--access-log", access]
        # The unit's 30 s to accept a websocket (daphne's 5 reset every tab of a burst).
        unit_flags += ["--websocket_connect_timeout", "30"]
        self._spawn(name, [*command, *unit_flags, "webapp.asgi:application"])
        self.ports[name] = port

    def spawn_worker(self, name: str) -> None:
        """Start `manage.py runworker skillscope-runs` (then `wait_ready`)."""
        self._spawn(name, [sys.executable, "manage.py", "runworker", "skillscope-runs"])

    def wait_ready(self, *names: str) -> None:
        """Wait until these serve: web processes answer /healthz, workers log their registration."""
        deadline = time.monotonic() + START_TIMEOUT
        for name in names:
            process = self.processes[name]
            while not self._ready(name):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{name} did not start:\n{self.log(name)[-3000:]}")
                time.sleep(0.1)

    def _ready(self, name: str) -> bool:
        if name not in self.ports:
            return any(
                entry.get("message", "").startswith("worker ") and " started (" in entry["message"]
                for entry in self.log_entries(name)
            )
        try:
            return self.get(name, "/healthz")[0] == 200
        except OSError:
            return False

    def get(self, name: str, path: str, *, cookie: str = "") -> tuple[int, dict[str, str], str]:
        """GET through web process `name` as nginx passes a request on: status, headers, body."""
        headers = dict(PROXY_HEADERS)
        if cookie:
            headers["Cookie"] = f"sessionid={cookie}"
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.ports[name]}{path}", headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, dict(response.headers), response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), exc.read().decode()

    def log_entries(self, name: str) -> list[dict[str, Any]]:
        """The process's JSON log lines (LOG_FORMAT=json), skipping anything else it printed."""
        entries = []
        for line in self.log(name).splitlines():
            if line.startswith("{"):
                try:
                    entries.append(json.loads(line))
                except ValueError:
                    pass
        return entries

    def _spawn(self, name: str, command: list[str]) -> subprocess.Popen[Any]:
        with open(self.logs / f"{name}.log", "ab") as log:  # the child keeps its own descriptor
            process = subprocess.Popen(
                command,
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.processes[name] = process
        return process

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        process = self.processes.pop(name)
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            pass
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            # Not left running: a worker that outlived its test claimed the next tests' runs
            # (a full run once failed three more tests that way). Its stacks go to its log first.
            if name.startswith("worker"):
                os.kill(process.pid, signal.SIGUSR1)
                time.sleep(1)
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=15)
            raise

    def log(self, name: str) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def all_logs(self) -> str:
        return "\n".join(
            f"----- {path.name}\n{path.read_text(errors='replace')[-4000:]}"
            for path in sorted(self.logs.glob("*.log"))
        )

    def stop_all(self) -> None:
        """SIGTERM every process group, SIGKILL what is still there after 5 s."""
        self.close_host()
        for name in list(self.processes):
            process = self.processes.pop(name)
            if process.poll() is not None:
                continue
            try:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout=5)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                process.wait(timeout=10)


ENV_FILE = ROOT / "deploy" / "skillscope.env"
# Where the tests' processes are reached, as nginx would pass requests on to them.
PUBLIC_HOST = "skills.example.com"
PROXY_HEADERS = {"Host": PUBLIC_HOST, "X-Forwarded-Proto": "https"}


# Settings the tests add for the fake model: its address, no retries (a failure shows at once),
# and no thinking (scripted replies count stream events; thinking would add its own).
TEST_ONLY = frozenset(
    {"ANTHROPIC_BASE_URL", "ANTHROPIC_MAX_RETRIES", "ANTHROPIC_THINKING", "CHAT_TITLE_MODEL"}
)


def documented_environment(tmp_path: Path, **machine: str) -> dict[str, str]:
    """The environment systemd builds from deploy/skillscope.env, for processes on this machine.

    The file is read by `webapp.envfile` (systemd's EnvironmentFile= rules) exactly as the guide
    installs it; only what names this machine is replaced: the database and Redis (throw-away
    servers), the directories and key files (under tmp_path), and the model's address (the fake
    Anthropic server). Everything else (HTTPS behind a proxy, HSTS, RUN_EXECUTOR=worker, the
    bubblewrap sandbox, JSON logs, the worker heartbeats' defaults) is the documented value.
    """
    from webapp import envfile

    documented = envfile.load(ENV_FILE)
    keys = tmp_path / "etc"
    keys.mkdir(parents=True, exist_ok=True)
    (keys / "secret_key").write_text(secrets.token_urlsafe(50) + "\n")
    (keys / "anthropic_api_key").write_text("sk-test-fake\n")
    local = {
        "SECRET_KEY_FILE": str(keys / "secret_key"),
        "ANTHROPIC_API_KEY_FILE": str(keys / "anthropic_api_key"),
        "SKILLSCOPE_VAR_DIR": str(tmp_path / "var"),
        "STATIC_ROOT": str(tmp_path / "static"),
        **machine,
    }
    unknown = set(local) - set(documented) - TEST_ONLY
    assert not unknown, f"not in the documented env file: {sorted(unknown)}"
    env = envfile.service_environment({**documented, **local}, os.environ, defaults=False)
    (tmp_path / "var").mkdir(exist_ok=True)
    # Not a setting: unbuffered output, so the logs are complete when a test reads them.
    env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.fixture(scope="session")
def collected_static(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`collectstatic` once (STATIC_MANIFEST=true in the env file needs its manifest)."""
    root = tmp_path_factory.mktemp("static")
    env = {
        **os.environ,
        "STATIC_ROOT": str(root),
        "STATIC_MANIFEST": "true",
        "SKILLSCOPE_VAR_DIR": str(tmp_path_factory.mktemp("static-var")),
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "--verbosity", "0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if result.returncode != 0:
        raise RuntimeError(f"collectstatic failed:\n{result.stderr[-3000:]}")
    return root


@pytest.fixture
def deployment(
    migrated, redis_url, fake_anthropic, collected_static, tmp_path
) -> Iterator[Deployment]:
    """The environment Skillscope's processes share; the test starts the processes it needs."""
    env = documented_environment(
        tmp_path,
        DATABASE_URL=migrated.url,
        REDIS_URL=redis_url,
        STATIC_ROOT=str(collected_static),
        ANTHROPIC_BASE_URL=fake_anthropic.base_url,
        ANTHROPIC_MAX_RETRIES="0",
        ANTHROPIC_THINKING="false",
        # Titles from the first message: a title request would take a scripted reply.
        CHAT_TITLE_MODEL="none",
    )
    logs = tmp_path / "logs"
    logs.mkdir()
    deployment = Deployment(env=env, logs=logs, redis_url=redis_url)
    try:
        yield deployment
    finally:
        deployment.stop_all()
