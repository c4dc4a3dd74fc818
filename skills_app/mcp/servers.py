"""Registering, listing and removing MCP servers; a server as the client's `ServerSpec`."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cryptography.fernet import InvalidToken
from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models, transaction

from skills_app import trail
from skills_app.core.mcp import ServerSpec
from skills_app.mcp import transport
from skills_app.models import AuditEvent, McpOAuthPendingSignIn, McpServer, sealed

NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")
ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Variables the app itself reads: a server is never handed one of them under its own name, so
# a declared env cannot be a way to copy the app's secrets into a server by mistake.
APP_SECRET_KEYS = frozenset(
    {"SECRET_KEY", "ANTHROPIC_API_KEY", "DATABASE_URL", "REDIS_URL", "OIDC_CLIENT_SECRET"}
)
# Headers the HTTP client sets itself.
RESERVED_HEADERS = frozenset({"host", "content-length", "content-type", "accept", "mcp-session-id"})


class McpSetupError(ValueError):
    """A registration or review that cannot be done as asked; the message says what to change."""


def identity_of(kind: str, *, argv: Sequence[str] = (), url: str = "") -> str:
    """What a server is: its exact argv or its URL (never its display name)."""
    return f"stdio:{json.dumps(list(argv))}" if kind == "stdio" else f"http:{url}"


def check_registration(
    *,
    name: str,
    kind: str,
    argv: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    read_only_paths: Sequence[str] = (),
    url: str = "",
    headers: Mapping[str, str] | None = None,
    groups: Iterable[str] = (),
    auth: str = "",
) -> list[Group]:
    """The checks a new server must pass (the groups it names, found); raises McpSetupError."""
    env, headers, groups = dict(env or {}), dict(headers or {}), list(groups)
    if auth not in ("", "oauth"):
        raise McpSetupError(f"Auth {auth!r}: use oauth, or nothing.")
    if auth == "oauth" and kind != "http":
        raise McpSetupError("OAuth is for Streamable HTTP servers (a URL), not stdio ones.")
    if auth == "oauth" and any(h.lower() == "authorization" for h in headers or {}):
        raise McpSetupError(
            "An OAuth server gets each person's own token; leave out the Authorization header."
        )
    if not NAME.fullmatch(name):
        raise McpSetupError(
            f"Server name {name!r}: use 1 to 40 lowercase letters, digits and dashes, starting "
            "with a letter or digit (it becomes mcp__NAME__tool)."
        )
    if kind == "stdio":
        _check_stdio(argv, env, read_only_paths, url, headers)
    elif kind == "http":
        _check_http(url, headers, argv, env, read_only_paths)
    else:
        raise McpSetupError(f"Server kind {kind!r}: use stdio or http.")
    identity = identity_of(kind, argv=argv, url=url)
    if McpServer.objects.filter(name=name).exists():
        raise McpSetupError(f'A server named "{name}" is registered already; pick another name.')
    same = McpServer.objects.filter(identity=identity).first()
    if same is not None:
        what = "argv" if kind == "stdio" else "URL"
        raise McpSetupError(f'This {what} is registered already, as "{same.name}".')
    found = list(Group.objects.filter(name__in=groups))
    missing = sorted(set(groups) - {g.name for g in found})
    if missing:
        raise McpSetupError(f"No group named {', '.join(missing)}.")
    return found


def register(
    *,
    name: str,
    kind: str,
    registered_by: Any,
    argv: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    read_only_paths: Sequence[str] = (),
    url: str = "",
    headers: Mapping[str, str] | None = None,
    display_name: str = "",
    groups: Iterable[str] = (),
    everyone: bool = False,
    auth: str = "",
    call_cost_usd: Decimal = Decimal(0),
) -> McpServer:
    """Check and store a new server; raises McpSetupError naming what is wrong."""
    env, headers = dict(env or {}), dict(headers or {})
    found = check_registration(
        name=name,
        kind=kind,
        argv=argv,
        env=env,
        read_only_paths=read_only_paths,
        url=url,
        headers=headers,
        groups=groups,
        auth=auth,
    )
    identity = identity_of(kind, argv=argv, url=url)
    with transaction.atomic():
        server = McpServer.objects.create(
            name=name,
            display_name=display_name or name,
            kind=kind,
            identity=identity,
            argv=list(argv),
            env=env,
            read_only_paths=list(read_only_paths),
            url=url,
            headers=headers,
            auth=auth,
            registered_by=registered_by,
            registered_by_name=registered_by.get_username() if registered_by else "",
            everyone=everyone,
            call_cost_usd=call_cost_usd,
        )
        server.groups.set(found)
        trail.record(
            AuditEvent.MCP_REGISTERED,
            target=f"mcp server {name}",
            actor=registered_by,
            kind=kind,
            identity=identity,
            env_keys=sorted(env),
            header_names=sorted(headers),
            auth=auth or "none",
            read_only_paths=list(read_only_paths),
            groups=sorted(g.name for g in found),
            everyone=everyone,
        )
    return server


def parse_pairs(lines: Iterable[str], sep: str, form: str) -> dict[str, str]:
    """`KEY=VALUE` (sep "=") or `Name: value` (sep ":") items as a dict; blank items skipped."""
    found: dict[str, str] = {}
    for item in lines:
        if not item.strip():
            continue
        key, ok, value = item.partition(sep)
        if not ok or not key.strip():
            raise McpSetupError(f"{item.strip()!r} is not of the form {form}.")
        found[key.strip()] = value.strip() if sep == ":" else value
    return found


def removal_counts(server: McpServer) -> dict[str, int]:
    """What goes with a server when it is removed: its definitions (with their reviews), the
    people's OAuth grants and their sign-ins still waiting."""
    prompts = server.definitions.filter(kind="prompt").count()
    return {
        "definitions": server.definitions.count(),
        "prompt_definitions": prompts,
        "oauth_grants": server.grants.count(),
        "oauth_people": server.grants.values("user").distinct().count(),
        "waiting_sign_ins": McpOAuthPendingSignIn.objects.filter(server=server).count(),
    }


def remove(server: McpServer, *, actor: Any) -> None:
    """Delete a server, its definitions and the people's grants (`mcp remove` and the admin);
    the audit keeps that it existed and every call made through it (rows naming it in words,
    with no key to cascade from)."""
    with transaction.atomic():
        counts = removal_counts(server)
        trail.record(
            AuditEvent.MCP_REMOVED,
            target=f"mcp server {server.name}",
            actor=actor,
            identity=server.identity,
            definitions=counts["definitions"],
            oauth_grants=counts["oauth_grants"],
        )
        server.delete()


def _check_stdio(
    argv: Sequence[str],
    env: Mapping[str, str],
    read_only_paths: Sequence[str],
    url: str,
    headers: Mapping[str, str],
) -> None:
    if url or headers:
        raise McpSetupError(
            "A stdio server takes an argv (and env, read-only folders), not a URL or headers."
        )
    if not argv or not argv[0]:
        raise McpSetupError(
            "A stdio server needs its command: the program's absolute path and its arguments "
            "(manage.py mcp add: -- /path/to/program ARGS, or --argv '...')."
        )
    if not os.path.isabs(argv[0]):
        raise McpSetupError(
            f"The program {argv[0]!r} must be an absolute path: the server runs exactly this "
            "argv, with no search of PATH."
        )
    for key in env:
        if not ENV_KEY.fullmatch(key):
            raise McpSetupError(f"Environment key {key!r}: use letters, digits and _.")
        if key in APP_SECRET_KEYS:
            raise McpSetupError(
                f"{key} is one of Skillscope's own settings; a server never gets it. Give the "
                "server its own key under another name."
            )
    protected = [Path(p).resolve() for p in (settings.BASE_DIR, settings.VAR_DIR)]
    for path in read_only_paths:
        if not os.path.isabs(path):
            raise McpSetupError(f"Read-only path {path!r} must be absolute.")
        real = Path(path).resolve()
        if not real.is_dir():
            raise McpSetupError(f"Read-only path {path!r} is not a folder here.")
        if any(real == p or real in p.parents for p in protected):
            raise McpSetupError(
                f"Read-only path {path!r} holds Skillscope's own folder (its data and secrets); "
                "name the server's own folder instead."
            )


def _check_http(
    url: str,
    headers: Mapping[str, str],
    argv: Sequence[str],
    env: Mapping[str, str],
    read_only_paths: Sequence[str],
) -> None:
    if argv or env or read_only_paths:
        raise McpSetupError(
            "An http server takes a URL and headers, not an argv, env or read-only folders."
        )
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise McpSetupError(f"URL {url!r}: give the server's full http(s):// address.")
    for name in headers:
        if name.lower() in RESERVED_HEADERS:
            raise McpSetupError(f"The header {name} is set by the client; leave it out.")


def spec_for(server: McpServer) -> ServerSpec:
    """The client's view of a server, with the configured timeouts."""
    return ServerSpec(
        name=server.name,
        kind=server.kind,
        argv=tuple(server.argv),
        env=dict(server.env),
        read_only=tuple(server.read_only_paths),
        url=server.url,
        headers=dict(server.headers),
        connect_timeout=settings.MCP_CONNECT_TIMEOUT,
        call_timeout=settings.MCP_CALL_TIMEOUT,
        ask_timeout=settings.MCP_ELICIT_TIMEOUT,
        keep_alive=settings.MCP_SESSION_IDLE_SECONDS,
        max_kept=settings.MCP_SESSIONS_MAX,
        http_clients=transport.http_client,
    )


def visible_servers(group_ids: frozenset[int]) -> list[McpServer]:
    """The enabled servers one person may see: open to everyone, or to one of their groups."""
    servers = McpServer.objects.filter(enabled=True).prefetch_related("groups").order_by("name")
    return [s for s in servers if s.everyone or any(g.pk in group_ids for g in s.groups.all())]


def reseal_secrets() -> int:
    """Encrypt every server's env and header values again under the current SECRET_KEY: after a
    key rotation, before the fallback keys are dropped (docs/deploy.md). Returns how many
    servers; raises McpSetupError, changing nothing, when a value opens under no configured
    key (it would read as empty: register that server again with its values)."""
    keys = sealed.fernet(sealed.SERVER_SECRETS)
    stored = McpServer.objects.annotate(
        raw_env=models.ExpressionWrapper(models.F("env"), output_field=models.JSONField()),
        raw_headers=models.ExpressionWrapper(models.F("headers"), output_field=models.JSONField()),
    )
    with transaction.atomic():
        servers = list(stored.select_for_update())
        for server in servers:
            raw = [*(server.raw_env or {}).values(), *(server.raw_headers or {}).values()]
            try:
                for value in raw:
                    keys.decrypt(str(value).encode())
            except InvalidToken:
                raise McpSetupError(
                    f'A stored value of "{server.name}" opens under none of the configured keys '
                    "(SECRET_KEY, SECRET_KEY_FALLBACKS); remove the server and register it "
                    "again with its values."
                ) from None
        for server in servers:
            server.save(update_fields=["env", "headers"])  # sealed again, under the current key
    return len(servers)
