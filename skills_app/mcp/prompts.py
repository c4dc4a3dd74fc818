"""MCP prompts in the chat's `/` menu, and invoking one: `/mcp__server__prompt name=value ...`.

The prompts offered are those of the servers one person may see (`servers.visible_servers`: a
group without the server never sees its prompts either) whose definition (name, description,
arguments) a reviewer approved, as for tools (`definitions.store_prompt_listing`, the same review
page and `mcp review`): a new or changed prompt waits, recorded in the audit, and is neither in
the menu nor invoked until then. A server none of whose definitions is approved is not asked.

A server's prompts are listed once and the listing reused for `MCP_LIST_CACHE_SECONDS` in this
process, as its tools are (`offer`); a server that cannot be listed offers no prompts until it
can. Invoking one asks the server for it (`prompts/get`) and gives back the text of its messages
as the person's turn: stored secrets masked, the conversation's hidden skill text withheld (the
same filter a tool's result passes before a browser sees it), and recorded in the audit as an MCP
call. Every server is asked from an empty folder of its own, never a conversation's workspace.
Like a tool's call, asking counts against the person's MCP calls quota and, by the server's cost
of a call, their spending limits (`quota`): checked before the server is asked, charged when it
answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model

from skills_app import trail
from skills_app.core.mcp import McpConnectError, ServerSpec
from skills_app.core.mcp.connect import Place, get_prompt, list_prompts
from skills_app.core.mcp.oauth import SignInRequired
from skills_app.core.mcp.prompts import (
    PromptArgumentError,
    PromptDefinition,
    bind_arguments,
    prompt_command,
    split_invocation,
)
from skills_app.core.mcp.secrets import mask
from skills_app.core.mcp.tool import with_grant
from skills_app.mcp import quota
from skills_app.mcp.definitions import approved_prompts, store_prompt_listing
from skills_app.mcp.filter import stored_secrets
from skills_app.mcp.oauth_grants import grants_for
from skills_app.mcp.servers import spec_for, visible_servers
from skills_app.models import AuditEvent, McpServer, McpToolDefinition
from skills_app.policy.access import policy_for


class PromptError(Exception):
    """A prompt that cannot be given as asked; the message says why and what to write."""


@dataclass(frozen=True, slots=True)
class _Held:
    at: float
    identity: str
    prompts: tuple[PromptDefinition, ...]


@dataclass(frozen=True, slots=True)
class MenuPrompt:
    """One prompt as the `/` menu shows it."""

    server: str
    command: str  # mcp__server__prompt
    definition: PromptDefinition


# server pk -> its last prompt listing in this process
_listings: dict[int, _Held] = {}
prompt_listing_count = 0  # prompts/list round trips made by this process (read by tests)


def forget_prompt_listings() -> None:
    _listings.clear()


def _offering(group_ids: frozenset[int]) -> list[McpServer]:
    """The visible servers with at least one approved definition (a tool or a prompt)."""
    approved = set(
        McpToolDefinition.objects.filter(status=McpToolDefinition.Status.APPROVED).values_list(
            "server_id", flat=True
        )
    )
    return [s for s in visible_servers(group_ids) if s.pk in approved]


async def _spec(server: McpServer, user_id: int) -> ServerSpec | None:
    """The server as this person reaches it; None for an OAuth server they have not signed in to."""
    spec = spec_for(server)
    if server.auth != "oauth":
        return spec
    grants = grants_for(user_id, server)
    try:
        return with_grant(spec, await grants.load(), grants)
    except SignInRequired:
        return None


async def _prompts_of(server: McpServer, user_id: int) -> tuple[PromptDefinition, ...]:
    global prompt_listing_count
    held = _listings.get(server.pk)
    now = time.monotonic()
    if (
        held is not None
        and held.identity == server.identity
        and now - held.at < settings.MCP_LIST_CACHE_SECONDS
    ):
        return held.prompts
    spec = await _spec(server, user_id)
    if spec is None:
        return ()
    prompt_listing_count += 1
    try:
        with _empty_place() as place:
            found = tuple(await list_prompts(spec, place))
    except (McpConnectError, SignInRequired):
        found = ()  # no prompts from a server that is down; tried again after the cache time
    else:
        await sync_to_async(store_prompt_listing)(server, found)
    _listings[server.pk] = _Held(now, server.identity, found)
    return found


async def _approved_of(server: McpServer, user_id: int) -> list[PromptDefinition]:
    """The server's listed prompts a reviewer approved as listed (read from the database each
    time: an approval counts at once, the listing is the cached part)."""
    return await sync_to_async(approved_prompts)(server, await _prompts_of(server, user_id))


async def menu_prompts(user_id: int, group_ids: frozenset[int]) -> list[MenuPrompt]:
    """Every prompt this person may invoke, by server and name."""
    found: list[MenuPrompt] = []
    offering = await sync_to_async(_offering)(group_ids)
    # Listed side by side: a slow server delays the menu by its own wait, not by the sum.
    listings = await asyncio.gather(*(_approved_of(server, user_id) for server in offering))
    for server, listing in zip(offering, listings, strict=True):
        for definition in listing:
            command = prompt_command(server.name, definition.name)
            if command is not None:
                found.append(MenuPrompt(server.name, command, definition))
    return found


@dataclass(frozen=True, slots=True)
class Invocation:
    """A prompt one person may invoke, its arguments bound: ready to be asked of its server."""

    server: McpServer
    prompt: str
    arguments: dict[str, str]
    spec: ServerSpec


async def resolve(text: str, *, user_id: int, group_ids: frozenset[int]) -> Invocation | None:
    """The invocation `text` makes (`/mcp__server__prompt args`), checked without asking the
    server for the prompt: None when it invokes no prompt of this person's; PromptError when it
    cannot be given (an argument missing, the MCP calls quota or budget, a sign-in needed)."""
    parts = split_invocation(text)
    if parts is None:
        return None
    server_name, prompt_name, rest = parts
    servers = {s.name: s for s in await sync_to_async(_offering)(group_ids)}
    server = servers.get(server_name)
    definition = None
    if server is not None:
        prompts = await _approved_of(server, user_id)
        definition = next((p for p in prompts if p.name == prompt_name), None)
    if server is None or definition is None:
        return None  # not a prompt this person has: sent as typed
    try:
        arguments = bind_arguments(definition, rest, f"mcp__{server_name}__{prompt_name}")
    except PromptArgumentError as exc:
        raise PromptError(str(exc)) from None
    over = await sync_to_async(_over_limits)(user_id, server.name)
    if over is not None:
        raise PromptError(f"The prompt was not asked for: {over}.")
    spec = await _spec(server, user_id)
    if spec is None:
        raise PromptError(
            f'Sign in to the MCP server "{server.display_name or server.name}" first '
            f"({grants_for(user_id, server).sign_in_url}), then send the prompt again."
        )
    return Invocation(server, prompt_name, arguments, spec)


async def ask(
    invocation: Invocation,
    *,
    user_id: int,
    conversation_id: int,
    inbound: Callable[[str], str],
    preview: Callable[[str, dict[str, Any]], Any],
) -> str:
    """The person's turn: the prompt's text as the server gives it, filtered and recorded in the
    audit as an MCP call. PromptError when the server cannot give it.

    `inbound(text)`: the text as the conversation's owner may see it (the hidden-content filter,
    `visibility.outbound`); `preview(command, arguments)`: the arguments as the audit keeps them
    (`visibility.mcp_call_preview`). Both handed in: the filter sits above this layer."""
    server, prompt_name, arguments = invocation.server, invocation.prompt, invocation.arguments
    started = time.monotonic()
    error = ""
    try:
        with _empty_place() as place:
            given = await get_prompt(invocation.spec, place, prompt_name, arguments)
    except (McpConnectError, SignInRequired) as exc:
        error = str(exc) or "sign-in required"
        given = ""
    secrets = await sync_to_async(stored_secrets)()
    filtered = await sync_to_async(inbound)(mask(given, secrets))
    await sync_to_async(_record)(
        user_id=user_id,
        conversation_id=conversation_id,
        server=server.name,
        prompt=prompt_name,
        arguments=mask(arguments, secrets),
        preview=preview,
        chars=len(given),
        duration_ms=round((time.monotonic() - started) * 1000),
        error=error,
    )
    if error:
        raise PromptError(error)
    if not filtered.strip():
        raise PromptError(f'The MCP server "{server.name}" gave the prompt "{prompt_name}" empty.')
    return filtered


def _over_limits(user_id: int, server: str) -> str | None:
    return quota.over_quota(user_id) or quota.over_budget(policy_for(user_id), server)


def _record(
    *,
    user_id: int,
    conversation_id: int,
    server: str,
    prompt: str,
    arguments: dict[str, str],
    preview: Callable[[str, dict[str, Any]], Any],
    chars: int,
    duration_ms: int,
    error: str,
) -> None:
    cost = quota.charge(policy_for(user_id), server) if not error else 0
    trail.record(
        AuditEvent.MCP_CALLED,
        target=f"mcp prompt {server}/{prompt}",
        actor=get_user_model().objects.filter(pk=user_id).first(),
        server=server,
        prompt=prompt,
        decision="allow",
        rule="invoked by the person (/ menu)",
        conversation=conversation_id,
        duration_ms=duration_ms,
        result_chars=chars,
        is_error=bool(error),
        error=error,
        cost_usd=str(cost),
        arguments=preview(f"mcp__{server}__{prompt}", dict(arguments)),
    )


@contextlib.contextmanager
def _empty_place() -> Iterator[Place]:
    """A fresh empty folder to run a stdio server in for one request, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="mcp-prompt-") as folder:
        root = Path(folder)
        (root / "skills").mkdir()
        yield Place(
            root=root,
            skills_dir=root / "skills",
            sandbox=settings.SANDBOX,
            hidden_paths=(str(settings.BASE_DIR), str(settings.VAR_DIR)),
        )
