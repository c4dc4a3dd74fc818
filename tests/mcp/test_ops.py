"""MCP calls in the audit, telemetry, limits and failures, against the toy server run for real.

What is kept of a call (its run events, its permission decisions, its audit row, its
`execute_tool` span) holds the arguments as the filter shows them: a stored secret of a
registered server masked and hidden skill text withheld, even where the call never left (a rule
denied it, or the filter refused it) and even with telemetry's content attributes turned on.
Then the limits and failures: the per-person calls-per-minute quota, Stop during a call, and a
stdio server that crashes mid-call (the one test here that starts the stdio toy server).
"""

from __future__ import annotations

import dataclasses
import json
import time

import pytest
from asgiref.sync import sync_to_async
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from skills_app.core.mcp import McpTool, list_tools
from skills_app.core.tools import ToolContext, Workspace
from skills_app.mcp import servers
from skills_app.models import (
    AuditEvent,
    Conversation,
    PermissionDecision,
    PermissionRule,
    Run,
    RunEvent,
)
from skills_app.runs import supervisor as runs
from skills_app.telemetry import setup
from skills_app.workspaces import workspace_for
from tests.mcp.test_filter import QUOTED, _results, _skills
from tests.mcp.test_mcp import http_server_named, listed_and_approved, place_in, stdio_server
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import rows, run_turn, use_fake_model, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def exporter():
    memory = InMemorySpanExporter()
    # Content attributes on: the worst case, arguments and results go on the spans.
    setup.install(processor=SimpleSpanProcessor(memory), include_hidden=True)
    yield memory
    setup.uninstall()


def _kept(conversation_id: int) -> str:
    """Every stored trace of the conversation's calls, as one string to search."""
    parts = [json.dumps(e.data) for e in RunEvent.objects.filter(conversation_id=conversation_id)]
    parts += [
        json.dumps([d.call_text, d.input, d.reason])
        for d in PermissionDecision.objects.filter(conversation_id=conversation_id)
    ]
    parts += [json.dumps(e.detail) for e in AuditEvent.objects.filter(action="mcp.called")]
    return "\n".join(parts)


async def test_a_calls_records_and_span_hold_its_filtered_arguments_and_its_facts(
    alice, bob, settings, fake_anthropic, http_server, tmp_path, exporter
):
    use_fake_model(settings, fake_anthropic, retries=0)
    settings.SANDBOX = "bwrap"
    settings.SKILLS_DIRS = _skills(tmp_path)
    header_value = "hk-71c3e95a0d24"
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill")
    await PermissionRule.objects.acreate(behavior="allow", rule_text="mcp__toy")
    await PermissionRule.objects.acreate(behavior="deny", rule_text="mcp__toy__echo")
    conversation = await Conversation.objects.acreate(owner=alice, title="mcp kept")
    toy = await sync_to_async(http_server_named)(bob, http_server, everyone=True)
    # Another server's stored header value: a secret, whichever server a call goes to.
    await sync_to_async(servers.register)(
        name="web",
        kind="http",
        registered_by=bob,
        url="http://127.0.0.1:9/mcp",
        headers={"X-Api-Key": header_value},
    )
    await listed_and_approved(toy, place_in(workspace_for(conversation.pk).root), alice)
    fake_anthropic.enqueue(
        Reply.tool_use("Skill", {"skill": "secret-notes", "args": "q3"}),
        # Refused by the filter; a tool a rule denies (so not offered: an unknown tool, never
        # filtered); refused for the secret; denied again; and one call that runs.
        Reply.tool_use("mcp__toy__touch_marker", {"label": "quoted", "note": f"{QUOTED}."}),
        Reply.tool_use("mcp__toy__echo", {"text": f"key {header_value} and {QUOTED}"}),
        Reply.tool_use("mcp__toy__touch_marker", {"label": "plain", "note": header_value}),
        Reply.tool_use("mcp__toy__echo", {"text": "x"}),
        Reply.tool_use("mcp__toy__big", {"n": 30}),
        Reply.text("done"),
    )
    settings.MCP_RESULT_LIMIT = 10
    run = await run_turn(conversation, "use the notes skill", alice)
    assert run.status == "done", run.error
    # The calls' arguments did reach the model's side as written (the attack is real).
    assert header_value in json.dumps(fake_anthropic.requests[-1]["messages"])
    kept = await sync_to_async(_kept)(conversation.pk)
    assert "mcp__toy__echo" in kept and "[stored secret]" in kept  # control: the calls are there
    assert header_value not in kept
    assert QUOTED not in kept
    spans = [s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool mcp__")]
    assert len(spans) == 5
    traced = json.dumps([dict(s.attributes or {}) for s in spans])
    assert header_value not in traced and QUOTED not in traced
    big = next(s for s in spans if s.name == "execute_tool mcp__toy__big")
    attrs = dict(big.attributes or {})
    assert attrs["skillscope.permission.decision"] == "allow"
    assert attrs["skillscope.mcp.server"] == "toy" and attrs["skillscope.mcp.tool"] == "big"
    assert len(attrs["skillscope.mcp.definition_hash"]) >= 16
    assert attrs["skillscope.mcp.result_chars"] == 30
    assert attrs["skillscope.mcp.truncated"] is True
    assert attrs["skillscope.mcp.duration_ms"] >= 0
    # The audit row of a call that ran keeps its filtered arguments.
    audited = [
        e.detail async for e in AuditEvent.objects.filter(action="mcp.called").order_by("pk")
    ]
    assert [d["tool"] for d in audited] == ["big"]
    assert audited[0]["arguments"] == {"n": 30}


async def test_calls_over_the_per_person_quota_are_refused_with_when_to_retry(
    alice, bob, settings, fake_anthropic, http_server
):
    use_fake_model(settings, fake_anthropic, retries=0)
    settings.MCP_CALLS_PER_MINUTE = 2
    await PermissionRule.objects.acreate(behavior="allow", rule_text="mcp__toy")
    conversation = await Conversation.objects.acreate(owner=alice, title="mcp quota")
    toy = await sync_to_async(http_server_named)(bob, http_server, everyone=True)
    await listed_and_approved(toy, place_in(workspace_for(conversation.pk).root), alice)
    fake_anthropic.enqueue(
        *[Reply.tool_use("mcp__toy__touch_marker", {"label": label}) for label in "abc"],
        Reply.text("done"),
    )
    run = await run_turn(conversation, "mark three times", alice)
    assert run.status == "done", run.error
    # Two calls ran; the third never reached the server.
    assert (http_server.folder / "marker-b").exists()
    assert not (http_server.folder / "marker-c").exists()
    results = await sync_to_async(_results)(conversation)
    refused = json.dumps(results[-1]["content"])
    assert results[-1]["is_error"] is True
    assert "quota" in refused and "try this call again in" in refused
    decisions = [
        (d.decision, "quota" in d.reason)
        async for d in PermissionDecision.objects.filter(conversation=conversation).order_by("pk")
    ]
    assert decisions == [("allow", False), ("allow", False), ("refused", True)]


async def test_stop_cancels_an_mcp_call_in_flight_and_keeps_the_conversation(
    alice, bob, settings, fake_anthropic, http_server
):
    use_fake_model(settings, fake_anthropic, retries=0)
    await PermissionRule.objects.acreate(behavior="allow", rule_text="mcp__toy")
    conversation = await Conversation.objects.acreate(owner=alice, title="mcp stop")
    toy = await sync_to_async(http_server_named)(bob, http_server, everyone=True)
    await listed_and_approved(toy, place_in(workspace_for(conversation.pk).root), alice)
    fake_anthropic.enqueue(
        Reply.tool_use("mcp__toy__wait_marked", {"label": "s", "seconds": 60}, text="Waiting."),
        Reply.text("never sent"),
    )
    run = await runs.start_run(conversation.pk, "wait a minute", user_id=alice.pk)
    started = http_server.folder / "started-s"

    async def call_started() -> bool:
        return started.exists()

    await wait_until(call_started, timeout=20, what="the call reaching the server")
    began = time.monotonic()
    assert await runs.stop_run(run.pk)
    assert time.monotonic() - began < 2.0
    assert (await Run.objects.aget(pk=run.pk)).status == Run.STOPPED
    # The server saw the call cancelled (the SDK closes the call's request: its task ends).
    cancelled = http_server.folder / "cancelled-s"

    async def call_cancelled() -> bool:
        return cancelled.exists()

    await wait_until(call_cancelled, timeout=5, what="the server seeing the cancellation")
    # Nothing is lost: the message, the call, and its result saying it was stopped.
    kept = await sync_to_async(rows)(conversation)
    answered = [r for r in kept if r.kind == "tool_result"]
    assert len(answered) == 1 and answered[0].meta.get("stopped") is True
    text = json.dumps([r.content for r in kept])
    assert "wait a minute" in text and "mcp__toy__wait_marked" in text
    assert "Stopped by the user before this tool call finished" in text
    assert len(fake_anthropic.requests) == 1  # the model was not called again


async def test_a_stdio_server_that_crashes_mid_call_is_an_error_result_and_the_next_call_starts_it(
    alice, tmp_path, settings
):
    settings.SANDBOX = "bwrap"
    server = await sync_to_async(stdio_server)(alice)
    # A call limit far past what the test allows: the crash must be seen, not waited out.
    spec = dataclasses.replace(servers.spec_for(server), call_timeout=60.0)
    ws = Workspace(tmp_path / "ws")
    defs = {d.name: d for d in await list_tools(spec, place_in(ws.root))}
    ctx = ToolContext(workspace=ws, sandbox="bwrap")
    began = time.monotonic()
    crashed = await McpTool(spec, defs["crash"], result_limit=1000).run({}, ctx)
    assert time.monotonic() - began < 10.0
    assert crashed.is_error
    assert crashed.content == (
        'The MCP server "toy" stopped before it could answer the call of crash: its process '
        "ended or closed its output (it may have crashed). The next call starts it again."
    )
    again = await McpTool(spec, defs["echo"], result_limit=1000).run({"text": "back"}, ctx)
    assert not again.is_error and again.content.endswith("echo: back")
