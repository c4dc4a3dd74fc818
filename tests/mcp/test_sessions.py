"""Kept MCP sessions, against the toy server run for real: a session serves the next call of the
same server and conversation, never another conversation's; it closes when idle and when the
pool is full; a server that says its tool list changed is listed again on the next turn."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async

from skills_app.core.mcp import McpConnectError, ServerSpec, call_tool
from skills_app.core.mcp.connect import kept_sessions
from skills_app.core.tools import ToolContext, Workspace
from skills_app.mcp import definitions, offer, servers
from skills_app.models import AuditEvent, McpServer, McpToolDefinition
from tests.mcp.conftest import READ_ONLY, stdio_argv
from tests.mcp.test_mcp import http_server_named, listed_and_approved, place_in, stdio_server
from tests.support.loop_helpers import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


async def _answer(spec, place, tool, arguments) -> str:
    """What the call answered, or the error it ended with (a tool the server lacks)."""
    try:
        outcome = await call_tool(spec, place, tool, arguments)
    except McpConnectError as exc:
        return f"failed: {exc}"
    return outcome.text


async def test_a_kept_stdio_session_serves_its_conversation_and_never_another(alice, tmp_path):
    server = await sync_to_async(stdio_server)(alice, "--growable")
    spec = servers.spec_for(server)
    mine, theirs = place_in(tmp_path / "mine"), place_in(tmp_path / "theirs")
    # `grow` adds a tool to the process that answers it: only that process has it.
    assert (await call_tool(spec, mine, "grow", {"name": "only_here"})).text == "added only_here"
    # The next call of the same conversation goes to the same process (the session was kept).
    assert await _answer(spec, mine, "only_here", {}) == "only_here answers"
    # Another conversation's call never reaches that process, which runs with the first
    # conversation's workspace: its own server has no such tool, and writes in its own folder.
    assert "only_here answers" not in await _answer(spec, theirs, "only_here", {})
    await call_tool(spec, theirs, "touch_marker", {"label": "theirs"})
    assert (theirs.root / "marker-theirs").exists()
    assert not (mine.root / "marker-theirs").exists()


async def test_a_kept_http_session_closes_when_idle_and_when_the_pool_is_full(
    alice, http_server, tmp_path
):
    server = await sync_to_async(http_server_named)(alice, http_server)
    spec = dataclasses.replace(servers.spec_for(server), keep_alive=0.5)
    place = place_in(tmp_path / "ws")
    for text in ("one", "two"):
        assert (await call_tool(spec, place, "echo", {"text": text})).text == f"echo: {text}"
    assert await kept_sessions() == 1  # both calls on one session

    async def none_kept() -> bool:
        return await kept_sessions() == 0

    await wait_until(none_kept, timeout=10, what="the idle session closing")
    # At most max_kept sessions: the least recently used one is closed for the new one.
    first = dataclasses.replace(spec, keep_alive=300.0, max_kept=1)
    second = dataclasses.replace(first, headers={"X-Other": "1"})
    await call_tool(first, place, "echo", {"text": "a"})
    await call_tool(second, place, "echo", {"text": "b"})
    assert await kept_sessions() == 1


async def test_a_call_that_fails_drops_its_kept_session(alice, http_server, tmp_path):
    server = await sync_to_async(http_server_named)(alice, http_server)
    spec = dataclasses.replace(servers.spec_for(server), connect_timeout=2.0, call_timeout=0.3)
    place = place_in(tmp_path / "ws")
    await call_tool(spec, place, "echo", {"text": "kept"})
    assert await kept_sessions() == 1
    with pytest.raises(McpConnectError, match="within 2.3 seconds"):
        await call_tool(spec, place, "hang", {"seconds": 10})
    assert await kept_sessions() == 0  # never reused after a call it did not finish
    assert (await call_tool(spec, place, "echo", {"text": "again"})).text == "echo: again"


async def test_a_server_that_says_its_tools_changed_is_listed_again_and_the_change_reviewed(
    alice, bob, tmp_path
):
    server = await sync_to_async(stdio_server)(alice, "--growable", everyone=True)
    place = place_in(tmp_path / "ws")
    await listed_and_approved(server, place, bob)
    listed = offer.listing_count
    first = await offer.offered_tools(group_ids=frozenset(), place=place, record=None)
    assert offer.listing_count == listed  # within the cache time: no listing
    grow = next(t for t in first.tools if t.name == "mcp__toy__grow")
    ctx = ToolContext(workspace=Workspace(place.root), sandbox="bwrap")
    assert (await grow.run({"name": "grown"}, ctx)).content.endswith("added grown")

    async def listed_again() -> bool:
        await offer.offered_tools(group_ids=frozenset(), place=place, record=None)
        return offer.listing_count > listed

    await wait_until(listed_again, timeout=10, what="the next turn listing the server again")
    # The new tool waits for review; the approved ones keep serving.
    added = await McpToolDefinition.objects.aget(tool="grown")
    assert added.status == "pending"
    assert await AuditEvent.objects.filter(action="mcp.tool_new", detail__tool="grown").aexists()
    offered = await offer.offered_tools(group_ids=frozenset(), place=place, record=None)
    names = {t.name for t in offered.tools}
    assert "mcp__toy__echo" in names and "mcp__toy__grown" not in names
    await sync_to_async(definitions.review)(server, approve=True, reviewer=bob, tool="grown")
    offered = await offer.offered_tools(group_ids=frozenset(), place=place, record=None)
    assert "mcp__toy__grown" in {t.name for t in offered.tools}


async def test_a_tools_change_heard_by_one_process_makes_every_process_list_again(
    alice, bob, tmp_path
):
    server = await sync_to_async(stdio_server)(alice, "--growable", everyone=True)
    place = place_in(tmp_path / "ws")
    await listed_and_approved(server, place, bob)
    # What another web process holds: this server's listing from before the change.
    elsewhere = dict(offer._listings)
    first = await offer.offered_tools(group_ids=frozenset(), place=place, record=None)
    grow = next(t for t in first.tools if t.name == "mcp__toy__grow")
    ctx = ToolContext(workspace=Workspace(place.root), sandbox="bwrap")
    assert (await grow.run({"name": "grown"}, ctx)).content.endswith("added grown")

    async def stamped() -> bool:
        await offer.offered_tools(group_ids=frozenset(), place=place, record=None)
        return (await McpServer.objects.aget(pk=server.pk)).tools_changed_at is not None

    await wait_until(stamped, timeout=10, what="the change stamped on the server's row")
    # The other process never heard the notification (it holds no session), yet its next turn
    # lists the server again, once: its new listing is newer than the change.
    offer._listings.clear()
    offer._listings.update(elsewhere)
    listed = offer.listing_count
    await offer.offered_tools(group_ids=frozenset(), place=place, record=None)
    assert offer.listing_count == listed + 1
    await offer.offered_tools(group_ids=frozenset(), place=place, record=None)
    assert offer.listing_count == listed + 1
    assert await McpToolDefinition.objects.filter(tool="grown", status="pending").aexists()


async def test_a_call_cancelled_in_flight_drops_its_kept_session(alice, http_server, tmp_path):
    server = await sync_to_async(http_server_named)(alice, http_server)
    spec, place = servers.spec_for(server), place_in(tmp_path / "ws")
    await call_tool(spec, place, "echo", {"text": "kept"})
    call = asyncio.ensure_future(
        call_tool(spec, place, "wait_marked", {"label": "c", "seconds": 60})
    )

    async def started() -> bool:
        return (http_server.folder / "started-c").exists()

    await wait_until(started, timeout=20, what="the call reaching the server")
    call.cancel()  # as Stop cancels the run's task
    with pytest.raises(asyncio.CancelledError):
        await call
    assert await kept_sessions() == 0  # a session a call was cut off on is never reused
    assert (await call_tool(spec, place, "echo", {"text": "next"})).text == "echo: next"


def _children() -> set[int]:
    """The live processes this test process started (read from /proc)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[1]) == os.getpid():
            found.add(int(stat.parent.name))
    return found


def test_the_loop_ending_closes_its_kept_sessions_and_ends_their_servers(tmp_path):
    spec = ServerSpec(
        "toy",
        "stdio",
        argv=tuple(stdio_argv()),
        read_only=tuple(READ_ONLY),
        connect_timeout=20.0,
        keep_alive=300.0,
    )
    place = place_in(tmp_path / "ws")
    before = _children()

    async def call() -> tuple[int, set[int]]:
        await call_tool(spec, place, "echo", {"text": "x"})
        return await kept_sessions(), _children() - before

    kept, running = asyncio.run(call())
    assert kept == 1 and running  # the server still runs after its call, for the next one
    assert not _children() & running  # and ends with its loop
