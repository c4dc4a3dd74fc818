"""scripts/run.sh: reads `.env` (the environment wins), prints the URL it really serves.

The script runs for real in a copy of the repository whose set-up step and `.venv/bin/python`
are stand-ins that record how they were called, so nothing is installed or started.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

from skills_app.models import Conversation
from tests.support.paths import REPO

ROOT = REPO

# Stands in for .venv/bin/python: the URL helper runs for real, anything else reports itself.
FAKE_PYTHON = """#!/bin/sh
if [ "$1" = "-m" ]; then exec "$REAL_PYTHON" "$@"; fi
echo "ran: $* key=${ANTHROPIC_API_KEY:-unset} model=${ANTHROPIC_MODEL:-unset}"
"""


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "run.sh", tmp_path / "scripts" / "run.sh")
    for stand_in in ("setup.sh", "sandbox-check.sh"):
        (tmp_path / "scripts" / stand_in).write_text("#!/bin/sh\nexit 0\n")
        (tmp_path / "scripts" / stand_in).chmod(0o755)
    shutil.copytree(
        ROOT / "webapp", tmp_path / "webapp", ignore=shutil.ignore_patterns("__pycache__")
    )
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    return tmp_path


def _run(checkout: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {"PATH": os.environ["PATH"], "PYTHON": sys.executable, "REAL_PYTHON": sys.executable}
    return subprocess.run(
        ["bash", "scripts/run.sh"],
        cwd=checkout,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_it_prints_the_address_it_listens_on(checkout):
    result = _run(checkout, SKILLSCOPE_ADDR="0.0.0.0:8123")
    assert result.returncode == 0, result.stderr
    assert "Starting Skillscope on http://127.0.0.1:8123/" in result.stdout
    assert "ran: manage.py runserver 0.0.0.0:8123" in result.stdout
    # A burst of tabs is accepted (daphne's 5 s reset them all: docs/deploy.md).
    assert "--websocket_handshake_timeout 20 key=" in result.stdout


def test_it_prints_the_public_url_when_one_is_set(checkout):
    result = _run(checkout, SKILLSCOPE_PUBLIC_URL="https://skills.example.com")
    assert "Starting Skillscope on https://skills.example.com/" in result.stdout
    assert "ran: manage.py runserver 127.0.0.1:8000" in result.stdout


def test_it_reads_dotenv_and_the_environment_wins(checkout):
    (checkout / ".env").write_text(
        "# copied from .env.example\nANTHROPIC_API_KEY=sk-from-file\n"
        "ANTHROPIC_MODEL=model-from-file\nSKILLSCOPE_ADDR=127.0.0.1:8456\n"
    )
    result = _run(checkout, ANTHROPIC_MODEL="model-from-shell")
    assert result.returncode == 0, result.stderr
    assert "Reading settings from .env" in result.stdout
    assert "ran: manage.py bootstrap key=sk-from-file model=model-from-shell" in result.stdout
    assert "Starting Skillscope on http://127.0.0.1:8456/" in result.stdout


def test_without_dotenv_only_the_environment_counts(checkout):
    result = _run(checkout)
    assert "Reading settings from .env" not in result.stdout
    assert "ran: manage.py bootstrap key=unset" in result.stdout


@pytest.mark.django_db
def test_the_demo_banner_says_where_the_key_is_read(alice, admin_user, settings):
    settings.ANTHROPIC_API_KEY = ""
    conversation = Conversation.objects.create(owner=admin_user, title="t")
    client = Client()
    client.force_login(admin_user)
    body = client.get(f"/c/{conversation.pk}/").content.decode()
    assert "in the server&#x27;s environment" in body or "in the server's environment" in body
    # `.env` is named only together with the script that reads it.
    assert "<code>./scripts/run.sh</code> also reads it from <code>.env</code>" in body
    # An ordinary user is told whom to ask, not about the server's settings.
    mine = Conversation.objects.create(owner=alice, title="t")
    client.force_login(alice)
    body = client.get(f"/c/{mine.pk}/").content.decode()
    assert "Ask your administrator to connect the real model." in body
    assert "ANTHROPIC_API_KEY" not in body
