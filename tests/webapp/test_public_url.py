"""One public URL: SKILLSCOPE_PUBLIC_URL, or the runserver address; everything printed uses it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command

from tests.support.paths import REPO
from tests.support.settings_under import settings_under
from webapp.publicurl import PublicURLError, host_of, normalise, public_url, url_from_addr

ROOT = REPO


@pytest.mark.parametrize(
    ("addr", "url"),
    [
        ("127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("8001", "http://127.0.0.1:8001"),
        ("0.0.0.0:9000", "http://127.0.0.1:9000"),
        ("[::]:9000", "http://[::1]:9000"),
        ("[::1]:8000", "http://[::1]:8000"),
        ("devbox.lan:8080", "http://devbox.lan:8080"),
    ],
)
def test_the_url_follows_the_listen_address(addr, url):
    assert url_from_addr(addr) == url


@pytest.mark.parametrize("addr", ["", "abc", "1.2.3.4:", ":8000", "host:99999", "host:80:80"])
def test_an_address_runserver_cannot_use_is_refused(addr):
    with pytest.raises(PublicURLError, match="SKILLSCOPE_ADDR"):
        url_from_addr(addr)


@pytest.mark.parametrize(
    ("given", "url"),
    [
        ("https://skills.example.com", "https://skills.example.com"),
        ("https://Skills.Example.com/", "https://skills.example.com"),
        ("https://skills.example.com:443", "https://skills.example.com"),
        ("http://10.0.0.5:8080", "http://10.0.0.5:8080"),
        ("http://[fd00::5]:8080/", "http://[fd00::5]:8080"),
    ],
)
def test_the_public_url_is_normalised(given, url):
    assert normalise(given) == url


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("skills.example.com", "not an http(s) URL"),
        ("ftp://skills.example.com", "not an http(s) URL"),
        ("https://skills.example.com/chat/", "has a path"),
        ("https://user:pw@skills.example.com", "more than a scheme and host"),
        ("https://skills.example.com/?x=1", "more than a scheme and host"),
        ("https://skills.example.com:99999", "invalid port"),
    ],
)
def test_a_public_url_that_cannot_work_is_refused_with_the_fix(given, says):
    with pytest.raises(PublicURLError, match=r"e\.g\. https://skills\.example\.com") as caught:
        normalise(given)
    assert says in str(caught.value)


def test_the_explicit_url_wins_over_the_address():
    env = {"SKILLSCOPE_PUBLIC_URL": "https://skills.example.com", "SKILLSCOPE_ADDR": "8001"}
    assert public_url(env) == "https://skills.example.com"
    assert public_url({"SKILLSCOPE_ADDR": "8001"}) == "http://127.0.0.1:8001"
    assert public_url({}) == "http://127.0.0.1:8000"


def test_hosts_are_written_as_allowed_hosts_expects():
    assert host_of("http://[::1]:8000") == "[::1]"
    assert host_of("https://skills.example.com") == "skills.example.com"


def _settings(tmp_path: Path, **env: str) -> dict[str, object]:
    base = {"PATH": os.environ["PATH"], "SKILLSCOPE_VAR_DIR": str(tmp_path)}
    read = settings_under({**base, **env})
    return {
        "url": read["SKILLSCOPE_PUBLIC_URL"],
        "hosts": read["ALLOWED_HOSTS"],
        "origins": read["CSRF_TRUSTED_ORIGINS"],
    }


def test_behind_a_proxy_the_public_host_is_the_allowed_host_and_origin(tmp_path):
    assert _settings(tmp_path, SKILLSCOPE_PUBLIC_URL="https://skills.example.com/") == {
        "url": "https://skills.example.com",
        "hosts": ["skills.example.com"],
        "origins": ["https://skills.example.com"],
    }


def test_locally_the_listen_host_joins_the_loopback_names(tmp_path):
    seen = _settings(tmp_path, SKILLSCOPE_ADDR="devbox.lan:8080")
    assert seen["url"] == "http://devbox.lan:8080"
    assert seen["hosts"] == ["127.0.0.1", "localhost", "[::1]", "devbox.lan"]
    assert seen["origins"] == []


def test_a_public_host_missing_from_allowed_hosts_stops_start_up(tmp_path):
    with pytest.raises(ImproperlyConfigured, match="does not include 'skills.example.com'"):
        _settings(
            tmp_path,
            SKILLSCOPE_PUBLIC_URL="https://skills.example.com",
            ALLOWED_HOSTS="other.example",
        )


def test_a_wildcard_allowed_host_covers_the_public_host(tmp_path):
    seen = _settings(
        tmp_path, SKILLSCOPE_PUBLIC_URL="https://skills.example.com", ALLOWED_HOSTS=".example.com"
    )
    assert seen["hosts"] == [".example.com"]


@pytest.mark.django_db
def test_bootstrap_prints_the_public_url(settings, tmp_path, capsys):
    settings.VAR_DIR = tmp_path
    settings.SKILLSCOPE_PUBLIC_URL = "https://skills.example.com"
    call_command("bootstrap")
    call_command("bootstrap")  # second run: the existing account, same URL
    out = capsys.readouterr().out
    assert out.count("https://skills.example.com/accounts/login/") == 2
    assert "127.0.0.1" not in out


def test_the_module_prints_the_url_for_scripts():
    result = subprocess.run(
        [sys.executable, "-m", "webapp.publicurl"],
        cwd=ROOT,
        env={"PATH": os.environ["PATH"], "SKILLSCOPE_ADDR": "0.0.0.0:8123"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.stdout == "http://127.0.0.1:8123\n"
