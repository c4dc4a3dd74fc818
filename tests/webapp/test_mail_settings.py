"""Mail for password resets: through EMAIL_HOST when it is set, into the server's log otherwise."""

from __future__ import annotations

import os

import pytest

from tests.support.settings_under import settings_under


def mail_settings(tmp_path, **env: str) -> list:
    base = {k: v for k, v in os.environ.items() if not k.startswith("EMAIL_")}
    read = settings_under({**base, "SKILLSCOPE_VAR_DIR": str(tmp_path / "var"), **env})
    return [
        read[name] for name in ("EMAIL_BACKEND", "EMAIL_HOST", "EMAIL_PORT", "EMAIL_HOST_PASSWORD")
    ]


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
