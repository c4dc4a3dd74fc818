"""The real ASGI app served by daphne in a subprocess, with its own var dir, users and rules."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.django_host import DjangoHost

REPO = Path(__file__).resolve().parents[2]


def worker_suffix() -> str:
    """A per-worker suffix ("-gw0", "-gw1") under pytest-xdist: each live server keeps its own log."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return f"-{worker}" if worker else ""


VENV_BIN = Path(sys.executable).parent

# The personas of tests/conftest.py, recreated in the live server's own database.
USERS = {
    "alice": "alice-pass-123",  # a chatter
    "audrey": "audrey-pass-123",  # an auditor
    "mona": "mona-pass-123",  # a skill manager
    "rita": "rita-pass-123",  # another skill manager: she reviews what mona uploads
}

# Runs in a separate interpreter with the live server's environment: migrate, users, rules.
_SETUP = """
import os
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0, interactive=False)
if {template!r} and not os.path.exists({template!r}):
    # The freshly migrated database, copied whole (SQLite's backup reads through the WAL) for
    # the next live server of this test process.
    import sqlite3
    from django.db import connection
    copy = sqlite3.connect({template!r} + ".part")
    with sqlite3.connect(connection.settings_dict["NAME"]) as source:
        source.backup(copy)
    copy.close()
    os.replace({template!r} + ".part", {template!r})
from django.contrib.auth.models import Permission, User
from skills_app.models import PermissionRule
from skills_app.accounts import roles
alice = User.objects.create_user("alice", password={alice!r})
roles.grant(alice, roles.get_role("chatter"))
audrey = User.objects.create_user("audrey", password={audrey!r}, is_staff=True)
audrey.user_permissions.add(Permission.objects.get(codename="inspect_injected_content"))
roles.grant(audrey, roles.get_role("auditor"))
mona = User.objects.create_user("mona", password={mona!r})
roles.grant(mona, roles.get_role("skill-manager"))
rita = User.objects.create_user("rita", password={rita!r})
roles.grant(rita, roles.get_role("skill-manager"))
for name in {allowed_skills!r}:
    PermissionRule.objects.create(behavior="allow", rule_text=f"Skill({{name}})")
for name in {asked_skills!r}:
    PermissionRule.objects.create(behavior="ask", rule_text=f"Skill({{name}})")
"""

# Settings from the developer's shell that would point the live server elsewhere.
_DROPPED_ENV = ("DATABASE_URL", "REDIS_URL", "SQLITE_PATH", "WORKSPACE_ROOT", "MEDIA_ROOT")


class LiveServerError(Exception):
    """The live server could not be prepared or did not come up; the message includes its log."""


@dataclass(frozen=True, slots=True)
class LiveServerConfig:
    """Where the live server keeps its state and which model endpoint and skills it uses."""

    var_dir: Path
    skills_dir: Path
    model_url: str
    log_path: Path
    allowed_skills: tuple[str, ...] = ()
    asked_skills: tuple[str, ...] = ()
    # More environment for this server (e.g. an identity provider), and Python run after the
    # users are made (groups, policies).
    extra_env: tuple[tuple[str, str], ...] = ()
    extra_setup: str = ""
    port: int | None = None
    # A migrated, empty database shared by the live servers of one test process: the first
    # server's set-up writes it after migrating, later ones start from a copy (migrating ~50
    # migrations anew is seconds of CPU) and their `migrate` finds nothing left to do.
    migrated_template: Path | None = None


def migrated_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where this test process's live servers keep their migrated, empty database."""
    return tmp_path_factory.getbasetemp() / "live-server-migrated.sqlite3"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_env(config: LiveServerConfig) -> dict[str, str]:
    """The environment of the setup script and of daphne."""
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
    env.update(
        DJANGO_SETTINGS_MODULE="webapp.settings",
        SKILLSCOPE_VAR_DIR=str(config.var_dir),
        ANTHROPIC_API_KEY="sk-test",
        ANTHROPIC_BASE_URL=config.model_url,
        ANTHROPIC_MAX_RETRIES="0",
        # Titles from the first message: a title request would take a scripted reply.
        CHAT_TITLE_MODEL="none",
        # Scripted replies count stream events; thinking (on by default) would add its own.
        ANTHROPIC_THINKING="false",
        SKILLS_DIRS=str(config.skills_dir),
        ALLOWED_HOSTS="127.0.0.1,localhost",
        APPROVAL_TIMEOUT="60",
        # Starting an MCP server (a Python interpreter importing the SDK) is a bound, not a
        # pause: on a busy machine it took over the default 10 s.
        MCP_CONNECT_TIMEOUT="60",
        # Four eyes: whoever uploads or submits a skill version cannot approve it too.
        SKILL_REVIEWER_MUST_DIFFER="true",
        # Every test sends messages as the same users within a minute or two.
        RATE_LIMIT_MESSAGES_PER_MINUTE="1000",
        RATE_LIMIT_CONCURRENT_RUNS="50",
        DEBUG="false",
        PYTHONUNBUFFERED="1",
    )
    env.update(dict(config.extra_env))
    return env


class LiveServer:
    """daphne serving webapp.asgi:application on a free loopback port."""

    def __init__(self, config: LiveServerConfig) -> None:
        self.config = config
        self.port = config.port or free_port()
        self._process: subprocess.Popen[bytes] | None = None
        self._log = None
        self._host: DjangoHost | None = None

    def host(self) -> DjangoHost:
        """A process with Django set up in the server's environment, for scripts on its data."""
        if self._host is None:
            self._host = DjangoHost(server_env(self.config), REPO)
        return self._host

    @property
    def url(self) -> str:
        """The base URL, without a trailing slash."""
        return f"http://127.0.0.1:{self.port}"

    def prepare(self) -> None:
        """Migrate the live server's database and create its users and skill rules."""
        self.config.var_dir.mkdir(parents=True, exist_ok=True)
        template = self.config.migrated_template
        if template is not None and template.exists():
            shutil.copyfile(template, self.config.var_dir / "db.sqlite3")
        script = (
            _SETUP.format(
                alice=USERS["alice"],
                audrey=USERS["audrey"],
                mona=USERS["mona"],
                rita=USERS["rita"],
                allowed_skills=list(self.config.allowed_skills),
                asked_skills=list(self.config.asked_skills),
                template=str(template or ""),
            )
            + self.config.extra_setup
        )
        done = subprocess.run(
            [str(VENV_BIN / "python"), "-c", script],
            cwd=REPO,
            env=server_env(self.config),
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise LiveServerError(f"Setting up the live server failed:\n{done.stderr[-4000:]}")

    def start(self, timeout: float = 90.0) -> None:
        """Start daphne and wait until the login page answers. A daphne that exits is reported
        at once; the wait is long because a loaded machine took over 30 s to start one (two
        fresh-clone runs beside other work, 2026-12-06), which failed every browser test."""
        self.config.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.config.log_path.open("wb")
        self._process = subprocess.Popen(
            [
                str(VENV_BIN / "daphne"),
                "-b",
                "127.0.0.1",
                "-p",
                str(self.port),
                "webapp.asgi:application",
            ],
            cwd=REPO,
            env=server_env(self.config),
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise LiveServerError(f"daphne exited at start-up:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/accounts/login/", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.1)
        self.stop()
        raise LiveServerError(f"daphne did not answer within {timeout} s:\n{self.log_tail()}")

    def stop(self) -> None:
        """Terminate daphne (kill it if it does not exit) and close its log."""
        if self._host is not None:
            self._host.close()
            self._host = None
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=5)
        self._process = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_tail(self, chars: int = 4000) -> str:
        """The end of daphne's output, for failure messages."""
        try:
            return self.config.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"
