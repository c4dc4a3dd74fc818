"""/healthz and /readyz: what load balancers and systemd ask, and what they must never learn."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone

from skills_app.models import Conversation, Run
from skills_app.ops import health

ROOT = Path(__file__).resolve().parents[1]
IN_MEMORY = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
# Every word a probe may say: anything else (a path, a host, an exception text) is a leak.
VOCABULARY = {
    "ok",
    "ready",
    "not ready",
    "unreachable",
    "timeout",
    "error",
    "none alive",
    "unknown",
}
VOCABULARY |= {"not used"}


@pytest.fixture(autouse=True)
def _fresh_probe(settings):
    settings.CHANNEL_LAYERS = IN_MEMORY
    settings.RUN_EXECUTOR = "inline"
    health.readiness.forget()
    yield
    health.readiness.forget()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens there once the socket is closed


def _assert_reveals_nothing(body: dict) -> None:
    assert set(body) <= {"status", "checks"}
    words = [body["status"], *body.get("checks", {}).values()]
    assert set(words) <= VOCABULARY, words


# -- /healthz ---------------------------------------------------------------------------------


def test_healthz_answers_without_touching_the_database():
    # No django_db mark: any query here would raise, so a 200 proves none was made.
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert "no-cache" in response["Cache-Control"] or "no-store" in response["Cache-Control"]


def test_probes_answer_a_load_balancer_by_address_over_plain_http(settings):
    settings.ALLOWED_HOSTS = ["skills.example.com"]
    settings.SECURE_SSL_REDIRECT = True
    client = Client()
    assert client.get("/healthz", HTTP_HOST="10.0.0.5:8001").status_code == 200
    # Positive controls: the host check and the redirect are on for everything else.
    assert client.get("/", HTTP_HOST="10.0.0.5:8001").status_code == 400
    assert client.get("/", HTTP_HOST="skills.example.com").status_code == 301


@pytest.mark.parametrize("path", ["/healthz/", "/healthz/x", "/healthzz", "/readyz/../admin/"])
def test_only_the_exact_probe_paths_skip_the_host_check(settings, path):
    settings.ALLOWED_HOSTS = ["skills.example.com"]
    assert Client().get(path, HTTP_HOST="evil.example.net").status_code == 400


def test_probes_refuse_writes():
    assert Client().post("/healthz").status_code == 405
    assert Client().put("/readyz").status_code == 405


def test_probes_answer_head():
    assert Client().head("/healthz").status_code == 200


# -- /readyz ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_readyz_is_ready_with_a_database_and_a_channel_layer():
    response = Client().get("/readyz")
    assert response.status_code == 200
    assert response.json() == {
        "status": "ready",
        "checks": {"database": "ok", "channel_layer": "ok", "workers": "not used"},
    }


@pytest.mark.django_db
def test_readyz_fails_when_the_channel_layer_is_unreachable(settings):
    port = _closed_port()
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [f"redis://127.0.0.1:{port}/0"]},
        }
    }
    response = Client().get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["checks"]["channel_layer"] in ("unreachable", "timeout")
    assert body["checks"]["database"] == "ok"
    _assert_reveals_nothing(body)
    assert str(port) not in response.content.decode()


@pytest.fixture
def conversation(alice):
    return Conversation.objects.create(owner=alice, title="t")


def _run(conversation, *, worker: str, beat_ago: float | None, started_ago: float = 0) -> Run:
    run = Run.objects.create(conversation=conversation, worker=worker)
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(
        heartbeat_at=None if beat_ago is None else now - timedelta(seconds=beat_ago),
        started_at=now - timedelta(seconds=started_ago),
    )
    return run


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("runs", "expected", "code"),
    [
        pytest.param([], "unknown", 200, id="idle-cannot-tell"),
        pytest.param([("w1 pid 1", 1.0, 5)], "ok", 200, id="a-worker-beats"),
        pytest.param([("w1 pid 1", 120.0, 200)], "none alive", 503, id="its-worker-died"),
        pytest.param([("", None, 120)], "none alive", 503, id="queued-and-never-claimed"),
        pytest.param([("", None, 1)], "unknown", 200, id="just-queued"),
        pytest.param(
            [("w1 pid 1", 120.0, 200), ("w2 pid 2", 1.0, 5)], "ok", 200, id="one-of-two-alive"
        ),
    ],
)
def test_readyz_needs_a_live_worker_when_runs_go_to_workers(
    settings, conversation, runs, expected, code
):
    settings.RUN_EXECUTOR = "worker"
    for worker, beat_ago, started_ago in runs:
        _run(conversation, worker=worker, beat_ago=beat_ago, started_ago=started_ago)
    response = Client().get("/readyz")
    assert response.json()["checks"]["workers"] == expected
    assert response.status_code == code


@pytest.mark.django_db
def test_a_flood_of_probes_runs_the_checks_once(monkeypatch):
    before = health.readiness.checks_run
    client = Client()
    for _ in range(20):
        assert client.get("/readyz").status_code == 200
    assert health.readiness.checks_run == before + 1


@pytest.mark.django_db
def test_the_answer_is_not_reused_past_its_time(monkeypatch):
    monkeypatch.setattr(health, "REUSE_SECONDS", 0.0)
    before = health.readiness.checks_run
    client = Client()
    for _ in range(3):
        client.get("/readyz")
    assert health.readiness.checks_run == before + 3


# -- a real process whose database is down ------------------------------------------------------


def _get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_a_process_whose_database_is_down_is_alive_but_not_ready(tmp_path):
    port, db_port = _closed_port(), _closed_port()
    env = {
        "PATH": os.environ["PATH"],
        "DJANGO_SETTINGS_MODULE": "webapp.settings",
        "SKILLSCOPE_VAR_DIR": str(tmp_path),
        "DATABASE_URL": f"postgres://nobody:secret-pw@127.0.0.1:{db_port}/nothing",
        "ALLOWED_HOSTS": "skills.example.com",
        "SECURE_SSL_REDIRECT": "true",
    }
    daphne = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port)]
    server = subprocess.Popen(
        [*daphne, "webapp.asgi:application"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert server.poll() is None, server.stderr.read().decode()
            try:
                status, body = _get(f"http://127.0.0.1:{port}/healthz")
                break
            except OSError:
                assert time.monotonic() < deadline, "daphne did not answer within 30 s"
                time.sleep(0.1)
        assert (status, body) == (200, {"status": "ok"})
        status, body = _get(f"http://127.0.0.1:{port}/readyz")
        assert status == 503
        assert body["checks"]["database"] == "unreachable"
        _assert_reveals_nothing(body)
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        server.stderr.close()
