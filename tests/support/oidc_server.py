"""A real OpenID Connect provider on loopback for the sign-in tests: panva's oidc-provider run with
Node.js (tests/oidc/provider.mjs, installed by `scripts/setup.sh test` from its lockfile).

The fixture `oidc_provider` yields an `OidcProvider` whose directory (people, passwords, groups) a
test edits with `set_person`; the provider reads it at every sign-in.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import pytest
import requests

from tests.support.paths import TESTS
from webapp.signin import oidc_app

HERE = TESTS / "oidc"
CLIENT_ID = "skillscope-tests"
CLIENT_SECRET = "skillscope-tests-secret-not-a-real-one"


@dataclass
class OidcProvider:
    issuer: str
    users_path: Path
    process: subprocess.Popen[str]
    people: dict[str, dict[str, Any]] = field(default_factory=dict)

    def set_person(
        self,
        username: str,
        password: str,
        groups: list[str],
        *,
        disabled: bool = False,
        name: str = "",
    ) -> None:
        """Add or change a person in the directory (read by the provider at every sign-in)."""
        self.people[username] = {
            "password": password,
            "groups": groups,
            "disabled": disabled,
            "name": name or username.title(),
            "email": f"{username}@example.org",
        }
        tmp = self.users_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.people))
        tmp.replace(self.users_path)

    def settings(self) -> dict[str, Any]:
        """The Skillscope settings that point at this provider (allauth's included)."""
        return {
            "SSO_OIDC_ISSUER": self.issuer,
            "SSO_OIDC_CLIENT_ID": CLIENT_ID,
            "SSO_OIDC_CLIENT_SECRET": CLIENT_SECRET,
            "SSO_NAME": "Example directory",
            "SOCIALACCOUNT_PROVIDERS": {
                "openid_connect": {
                    "APPS": [
                        oidc_app(
                            issuer=self.issuer,
                            client_id=CLIENT_ID,
                            secret=CLIENT_SECRET,
                            name="Example directory",
                            scopes=["openid", "profile", "email", "groups"],
                        )
                    ]
                }
            },
        }

    def env(self) -> dict[str, str]:
        """The same as environment variables, for a server in another process."""
        return {
            "SSO_OIDC_ISSUER": self.issuer,
            "SSO_OIDC_CLIENT_ID": CLIENT_ID,
            "SSO_OIDC_CLIENT_SECRET": CLIENT_SECRET,
            "SSO_NAME": "Example directory",
        }


def _pump(stream: Any, sink: list[str]) -> None:
    for line in stream:
        sink.append(line)


def start_provider(tmp: Path, redirect_uris: list[str]) -> OidcProvider:
    node = shutil.which("node")
    if node is None or not (HERE / "node_modules" / "oidc-provider").is_dir():
        pytest.skip("Node.js or tests/oidc/node_modules is missing: run `scripts/setup.sh test`")
    users = tmp / "directory.json"
    users.write_text("{}")
    clients = tmp / "clients.json"
    clients.write_text(
        json.dumps(
            [
                {
                    "client_id": CLIENT_ID,
                    "client_secret": CLIENT_SECRET,
                    "redirect_uris": redirect_uris,
                    "grant_types": ["authorization_code"],
                    "response_types": ["code"],
                    "token_endpoint_auth_method": "client_secret_post",
                }
            ]
        )
    )
    process = subprocess.Popen(
        [node, str(HERE / "provider.mjs"), str(users), str(clients)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=HERE,
    )
    assert process.stdout is not None and process.stderr is not None
    errors: list[str] = []
    threading.Thread(target=_pump, args=(process.stderr, errors), daemon=True).start()
    line = process.stdout.readline()  # blocks until it listens (or dies)
    found = re.match(r"ISSUER (\S+)", line)
    if not found:
        process.kill()
        raise RuntimeError(f"the OIDC provider did not start: {line!r} {''.join(errors)[-2000:]}")
    threading.Thread(target=_pump, args=(process.stdout, []), daemon=True).start()
    return OidcProvider(issuer=found[1], users_path=users, process=process)


def stop_provider(provider: OidcProvider) -> None:
    provider.process.terminate()
    try:
        provider.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        provider.process.kill()


@pytest.fixture
def oidc_provider(tmp_path: Path) -> Iterator[OidcProvider]:
    """The provider, with Django's test client callback URL registered."""
    provider = start_provider(tmp_path, ["http://testserver/accounts/oidc/sso/login/callback/"])
    try:
        yield provider
    finally:
        stop_provider(provider)


def sign_in_at_provider(authorize_url: str, username: str, password: str) -> tuple[str, str]:
    """Play the person at the provider's pages: follow the authorization request to the login
    page, submit the form, follow the redirects until they leave the provider.

    Returns ("callback", URL back to Skillscope) or ("page", the provider page's HTML) when the
    provider kept the person there (a wrong password).
    """
    session = requests.Session()
    response = session.get(authorize_url, allow_redirects=True, timeout=10)
    form = re.search(r'action="(/interaction/[^"]+/login)"', response.text)
    assert form, response.text[:1000]
    url = urljoin(response.url, form[1])
    reply = session.post(
        url, data={"login": username, "password": password}, allow_redirects=False, timeout=10
    )
    issuer = authorize_url.split("/auth")[0]
    while reply.status_code in (302, 303):
        target = urljoin(reply.url, reply.headers["location"])
        if not target.startswith(issuer):
            return "callback", target
        reply = session.get(target, allow_redirects=False, timeout=10)
    return "page", reply.text
