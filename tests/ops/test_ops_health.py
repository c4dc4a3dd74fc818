"""/healthz and /readyz: what load balancers and systemd ask, and what they must never learn."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import timedelta

import pytest
import redis
from channels.layers import get_channel_layer
from django.test import Client
from django.utils import timezone

from skills_app.models import Run, Worker
from skills_app.ops import health
from tests.support.paths import REPO
from webapp.redis_layer import redis_host

ROOT = REPO
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
    settings.CHANNEL_LAYERS = _redis_layer(port)
    response = Client().get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["checks"]["channel_layer"] in ("unreachable", "timeout")
    assert body["checks"]["database"] == "ok"
    _assert_reveals_nothing(body)
    assert str(port) not in response.content.decode()


@pytest.fixture
def redis_layer(settings):
    """A real redis-server for the channel layer (the production backend)."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (apt redis-server)")
    port = _closed_port()
    server = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.05)
        settings.CHANNEL_LAYERS = _redis_layer(port)
        yield port
    finally:
        server.kill()
        server.wait(timeout=10)


async def test_the_channel_layer_check_reuses_its_channel_while_a_websocket_is_receiving(
    redis_layer,
):
    """Each check used a new channel: on the pub/sub layer a subscription that stayed for
    good, one more per probe (a load balancer asks every few seconds)."""
    layer = get_channel_layer()
    browser = await layer.new_channel()
    reading = asyncio.ensure_future(layer.receive(browser))
    try:
        assert await health.check_channel_layer() == "ok"
        subscribed = _subscriptions(redis_layer)
        for _ in range(5):
            assert await health.check_channel_layer() == "ok"
        assert _subscriptions(redis_layer) == subscribed
        await layer.send(browser, {"type": "still.works"})
        assert (await asyncio.wait_for(reading, 5))["type"] == "still.works"
    finally:
        reading.cancel()
        await layer.flush()


def _redis_layer(port: int) -> dict[str, dict[str, object]]:
    return {
        "default": {
            "BACKEND": "webapp.redis_layer.RedisChannelLayer",
            "CONFIG": {"hosts": [redis_host(f"redis://127.0.0.1:{port}/0")]},
        }
    }


def _subscriptions(port: int) -> int:
    client = redis.Redis(port=port)
    try:
        return len(client.pubsub_channels())
    finally:
        client.close()


def _worker(name: str, *, beat_ago: float, stopped: bool = False) -> Worker:
    now = timezone.now()
    return Worker.objects.create(
        name=name,
        started_at=now - timedelta(seconds=600),
        heartbeat_at=now - timedelta(seconds=beat_ago),
        stopped_at=now if stopped else None,
    )


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("workers", "expected", "code"),
    [
        pytest.param([], "none alive", 503, id="no-worker-ever-started"),
        pytest.param([("w1", 1.0, False)], "ok", 200, id="a-worker-beats"),
        pytest.param([("w1", 30.0, False)], "none alive", 503, id="its-worker-went-silent"),
        pytest.param([("w1", 0.5, True)], "none alive", 503, id="its-worker-shut-down"),
        pytest.param([("w1", 30.0, False), ("w2", 1.0, False)], "ok", 200, id="one-of-two-alive"),
    ],
)
def test_readyz_needs_a_live_worker_when_runs_go_to_workers(settings, workers, expected, code):
    settings.RUN_EXECUTOR = "worker"
    settings.WORKER_STALE_SECONDS = 4
    for name, beat_ago, stopped in workers:
        _worker(name, beat_ago=beat_ago, stopped=stopped)
    response = Client().get("/readyz")
    assert response.json()["checks"]["workers"] == expected
    assert response.status_code == code


@pytest.mark.django_db
def test_an_idle_deployment_with_a_live_worker_is_ready(settings, alice):
    """No run in flight says nothing about workers: the registry does."""
    settings.RUN_EXECUTOR = "worker"
    _worker("w1", beat_ago=0.2)
    assert not Run.objects.exists()
    assert Client().get("/readyz").json()["checks"]["workers"] == "ok"


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
