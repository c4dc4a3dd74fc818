"""Rotating the secret key (docs/deploy.md): signed-in people stay signed in through one rotation.

Django checks a session against a hash made with the secret key; with a new key alone every
session fails that check and everyone is logged out. The old key in SECRET_KEY_FALLBACKS keeps
them in, and the settings read it from the environment or a file as the guide installs it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.test import Client

from tests.support.settings_under import settings_under

pytestmark = pytest.mark.django_db

OLD, NEW = "old-key-" + "a" * 50, "new-key-" + "b" * 50


def _signed_in_client(settings, alice) -> Client:
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = OLD, []
    client = Client()
    client.force_login(alice)
    assert client.get("/").status_code == 200
    return client


def test_a_session_survives_one_rotation_with_the_old_key_as_a_fallback(settings, alice):
    client = _signed_in_client(settings, alice)
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = NEW, [OLD]
    assert client.get("/").status_code == 200
    # Django re-signs the session with the new key on the way: the fallback can go later.
    settings.SECRET_KEY_FALLBACKS = []
    assert client.get("/").status_code == 200


def test_without_the_fallback_a_rotation_logs_everyone_out(settings, alice):
    # The positive control: the fallback is what keeps the session above.
    client = _signed_in_client(settings, alice)
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = NEW, []
    response = client.get("/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def _settings_with(env: dict[str, str], tmp_path: Path) -> list[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("SECRET_KEY")}
    read = settings_under(base | {"SKILLSCOPE_VAR_DIR": str(tmp_path)} | env)
    return list(read["SECRET_KEY_FALLBACKS"])


def test_the_fallbacks_are_read_from_the_environment_or_a_file(tmp_path):
    assert _settings_with({"SECRET_KEY": NEW}, tmp_path) == []
    assert _settings_with(
        {"SECRET_KEY": NEW, "SECRET_KEY_FALLBACKS": f"{OLD} x-{OLD}"}, tmp_path
    ) == [
        OLD,
        f"x-{OLD}",
    ]
    keys = tmp_path / "secret_key_fallbacks"
    keys.write_text(f"{OLD}\n\n")
    assert _settings_with(
        {"SECRET_KEY": NEW, "SECRET_KEY_FALLBACKS_FILE": str(keys)}, tmp_path
    ) == [OLD]
