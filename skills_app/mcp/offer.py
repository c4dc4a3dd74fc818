"""The MCP tools one run offers: the approved definitions of the servers its person may see.

A server's tools are listed once and the listing is reused for `MCP_LIST_CACHE_SECONDS` in this
process (so a turn after the first makes no tools/list round trip); each listing is stored
(`definitions.store_listing`: drift waits for review). A server that says its tool list changed
(`notifications/tools/list_changed`, heard on a kept session) loses its cached listing, so the
next turn lists it again and a changed definition goes to review. A server that cannot be listed is left out
of the run with one notice for the person, and the run goes on without it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone

from skills_app import trail
from skills_app.core.mcp import CallRecord, McpConnectError, McpTool, list_tools
from skills_app.core.mcp.connect import Place, ServerSpec, on_tools_changed
from skills_app.core.mcp.definitions import model_tool_name
from skills_app.core.mcp.elicit import Asker
from skills_app.core.mcp.oauth import SignInRequired
from skills_app.core.mcp.tool import with_grant
from skills_app.mcp import quota
from skills_app.mcp.definitions import serving, store_listing
from skills_app.mcp.filter import stored_secrets
from skills_app.mcp.oauth_grants import PersonGrants, grants_for
from skills_app.mcp.servers import identity_of, spec_for, visible_servers
from skills_app.models import AuditEvent, McpServer
from skills_app.models.statements import Statement
from skills_app.policy.access import Policy

logger = logging.getLogger(__name__)

# A failed listing is tried again after this many seconds at most (a server may come back).
_RETRY_DOWN_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class _Listed:
    at: float
    identity: str
    problem: str  # "" when the listing worked
    wall: datetime  # when, for comparing with `McpServer.tools_changed_at`


# server pk -> its last listing in this process
_listings: dict[int, _Listed] = {}
listing_count = 0  # tools/list round trips made by this process (read by tests and bench)


@dataclass(frozen=True, slots=True)
class Offer:
    """The MCP tools of a run and the notices of servers left out."""

    tools: tuple[McpTool, ...]
    notices: tuple[str, ...]


def forget_listings() -> None:
    """Drop every cached listing (tests; after a server changed on purpose)."""
    _listings.clear()


# Identities of servers that said their tool list changed, not yet stamped in the database.
_heard: set[str] = set()


def _tools_changed(spec: ServerSpec) -> None:
    """A server said its tool list changed: its next turn lists it again, in this process at
    once and in every other once the change is stamped (`stamp_tools_changed`)."""
    identity = identity_of(spec.kind, argv=spec.argv, url=spec.url)
    _heard.add(identity)
    for pk, held in list(_listings.items()):
        if held.identity == identity:
            del _listings[pk]


def stamp_tools_changed() -> None:
    """Write down the changes this process heard (sync: it queries), so every process's
    listing from before them is stale. Called after each call and before each offer: the
    notification comes on a session, mostly during a call, never inside a transaction here."""
    if not _heard:
        return
    identities = set(_heard)
    _heard.difference_update(identities)
    McpServer.objects.filter(identity__in=identities).update(tools_changed_at=timezone.now())


on_tools_changed(_tools_changed)


async def offered_tools(
    *,
    group_ids: frozenset[int],
    place: Place,
    record: Callable[[CallRecord], Awaitable[None]] | None,
    user_id: int | None = None,
    ask: Asker | None = None,
) -> Offer:
    """The approved tools of every server visible to these groups, listed at most once a while.

    An OAuth server is listed with the person's own token; without one its approved tools are
    offered as they are, and a call answers that the person must sign in first."""
    if _heard:
        await sync_to_async(stamp_tools_changed)()
    servers = await sync_to_async(visible_servers)(group_ids)
    tools: list[McpTool] = []
    notices: list[str] = []
    secrets = await sync_to_async(stored_secrets)() if servers else ()
    for server in servers:
        grants = None
        if server.auth == "oauth":
            if user_id is None:
                continue  # no person to act as
            grants = grants_for(user_id, server)
        problem = await _listed(server, place, grants)
        if problem:
            notices.append(
                f'The tools of the MCP server "{server.display_name or server.name}" are left '
                f"out of this turn: {problem}"
            )
            continue
        spec = spec_for(server)
        for definition in await sync_to_async(serving)(server):
            if model_tool_name(server.name, definition.name) is None:
                continue  # a tool name the API cannot carry is never offered
            tools.append(
                McpTool(
                    spec,
                    definition,
                    result_limit=settings.MCP_RESULT_LIMIT,
                    media_limit=settings.MCP_MEDIA_MAX_BYTES,
                    record=record,
                    secrets=secrets,
                    grants=grants,
                    ask=ask,
                )
            )
    return Offer(tuple(tools), tuple(notices))


async def _listed(server: McpServer, place: Place, grants: PersonGrants | None = None) -> str:
    """ "" when the server's listing is fresh (listing it now if needed), else why not."""
    global listing_count
    held = _listings.get(server.pk)
    now = time.monotonic()
    changed = server.tools_changed_at
    if (
        held is not None
        and held.identity == server.identity
        and (changed is None or changed < held.wall)
    ):
        ttl: float = settings.MCP_LIST_CACHE_SECONDS
        if held.problem:
            ttl = min(ttl, _RETRY_DOWN_SECONDS)
        if now - held.at < ttl:
            return held.problem
    spec = spec_for(server)
    if grants is not None:
        grant = await grants.load()
        try:
            spec = with_grant(spec, grant, grants)
        except SignInRequired:
            return ""  # the person has not signed in: the approved definitions serve
    listing_count += 1
    wall = timezone.now()  # before asking: a change heard meanwhile is newer than this listing
    try:
        listed = await list_tools(spec, place)
    except SignInRequired:
        return ""  # the token no longer works: a call says to sign in again
    except McpConnectError as exc:
        _listings[server.pk] = _Listed(now, server.identity, str(exc), wall)
        return str(exc)
    try:
        await sync_to_async(store_listing)(server, listed)
    except Exception:  # a listing that cannot be stored leaves the server out, not the turn
        logger.exception("Storing the tool listing of the MCP server %s failed", server.name)
        problem = "its tool list could not be stored (see the server log)."
        _listings[server.pk] = _Listed(now, server.identity, problem, wall)
        return problem
    _listings[server.pk] = _Listed(now, server.identity, "", wall)
    return ""


def call_recorder(
    *,
    user_id: int,
    policy: Policy | None = None,
    conversation_id: int,
    run_id: int | None,
    preview: Callable[[str, dict[str, Any]], Any],
) -> Callable[[CallRecord], Awaitable[None]]:
    """What each call that ran leaves in the audit trail; `preview(tool, arguments)`: its
    arguments as the audit keeps them (filtered: `visibility.mcp_call_preview`). `policy`: whose
    spending limits a call counts against (`quota.charge`)."""

    def write(call: CallRecord) -> None:
        stamp_tools_changed()
        cost = quota.charge(policy, call.server)
        trail.append(
            AuditEvent.MCP_CALLED,
            target=f"mcp tool {call.server}/{call.tool}",
            actor=_user(user_id),
            server=call.server,
            tool=call.tool,
            definition_hash=call.definition_hash,
            decision="allow",
            conversation=conversation_id,
            run=run_id,
            duration_ms=call.duration_ms,
            result_chars=call.result_chars,
            truncated=call.truncated,
            is_error=call.is_error,
            error=call.error,
            cost_usd=str(cost),
            arguments=preview(f"mcp__{call.server}__{call.tool}", dict(call.arguments)),
        )

    async def record(call: CallRecord) -> None:
        await sync_to_async(write)(call)

    return record


def _user(user_id: int) -> object:
    """The person as the audit row names them (None once deleted), read at each call with a
    precompiled statement (the ORM's own query cost more than the rest of the row)."""
    found = _USERNAME.rows(user_id)
    if not found:
        return None
    user_model = get_user_model()
    return user_model(pk=user_id, **{user_model.USERNAME_FIELD: found[0][0]})


_USERNAME = Statement(
    lambda user_id: (
        get_user_model().objects.filter(pk=user_id).values_list(get_user_model().USERNAME_FIELD)
    ),
    values=1,
)
