"""Mail for password resets: through EMAIL_HOST when it is set, into the server's log otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.paths import REPO

READ = (
    "import json, django; django.setup(); from django.conf import settings as s; "
    "print(json.dumps([s.EMAIL_BACKEND, s.EMAIL_HOST, s.EMAIL_PORT, s.EMAIL_HOST_PASSWORD]))"
)


def mail_settings(tmp_path, **env: str) -> list:
    base = {k: v for k, v in os.environ.items() if not k.startswith("EMAIL_")}
    done = subprocess.run(
        [sys.executable, "-c", READ],
        cwd=REPO,
        env={
            **base,
            "DJANGO_SETTINGS_MODULE": "webapp.settings",
            "SKILLSCOPE_VAR_DIR": str(tmp_path / "var"),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, ["django.core.mail.backends.console.EmailBackend", "", 587, ""]),
        (
            {"EMAIL_HOST": "smtp.example.org", "EMAIL_PORT": "25", "EMAIL_HOST_PASSWORD": "pw"},
            ["django.core.mail.backends.smtp.EmailBackend", "smtp.example.org", 25, "pw"],
        ),
    ],
)
def test_mail_goes_through_the_configured_host_or_into_the_log(tmp_path, env, expected):
    assert mail_settings(tmp_path, **env) == expected
