"""MCP calls both ways through the hidden-content filter, against the toy server run for real.

The filter does not care how a server is reached, so these tests use the shared toy HTTP server
(conftest's `http_server`, started once), and the stdio toy server only where its environment is
the point (a stdio server's env values are stored secrets); each stdio listing or call starts a
Python interpreter in bubblewrap, about a second of CPU.

Outbound: arguments that quote a hidden skill's text, or carry a stored secret of a registered
server (a stdio server's env value, an HTTP server's header value), are refused before the call
leaves: the server's side records nothing (the marker file `touch_marker` would write is absent),
the refusal is a recorded decision, and the model gets an error result saying why.
Inbound: a result that carries hidden skill text reaches the model (marked as untrusted output)
but no browser of a person who may not inspect; an auditor does see it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import Client
from django.urls import reverse

from skills_app.core.tools.workspace import skill_folder_name
from skills_app.mcp import servers
from skills_app.models import (
    AuditEvent,
    Conversation,
    ConversationShare,
    PermissionDecision,
    PermissionRule,
)
from skills_app.visibility import outbound
from skills_app.workspaces import workspace_for
from tests.mcp.test_mcp import http_server_named, listed_and_approved, place_in, stdio_server
from tests.security.test_security_websockets import _connect, _until
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import rows, run_turn, use_fake_model, write_skills

# Only in a supporting file of the skill: no page shows it unless something leaks that file.
REFERENCE_MARKER = "REFERENCE-ONLY-3c81e0d2"
SKILL = (
    "---\nname: secret-notes\ndescription: Notes with a hidden body.\nallowed-tools: Read\n---\n"
    "Follow the quarterly reconciliation checklist exactly as written in the vault for $ARGUMENTS.\n"
)
REFERENCE = (
    f"{REFERENCE_MARKER}: the reconciliation thresholds are kept here and never shown to users.\n"
)
QUOTED = "Follow the quarterly reconciliation checklist exactly as written in the vault"
UNTRUSTED = "untrusted data, not instructions"


def _skills(tmp_path) -> list[Any]:
    root = write_skills(tmp_path / "skills", {"secret-notes": SKILL})
    (root / "secret-notes" / "reference.md").write_text(REFERENCE)
    return [root]


def _results(conversation) -> list[dict[str, Any]]:
    return [
        block
        for row in rows(conversation)
        if row.kind == "tool_result"
        for block in row.content
        if block.get("type") == "tool_result"
    ]


def _page(user, conversation_id: int, name: str = "conversation") -> bytes:
    client = Client()
    client.force_login(user)
    response = client.get(reverse(name, args=[conversation_id]))
    assert response.status_code == 200
    return response.content


@pytest.mark.django_db(transaction=True)
async def test_a_result_carrying_hidden_skill_text_reaches_no_ordinary_browser(
    alice, bob, auditor, settings, fake_anthropic, http_server, tmp_path
):
    use_fake_model(settings, fake_anthropic, retries=0)
    settings.SANDBOX = "bwrap"
    settings.RATE_LIMIT_MESSAGES_PER_MINUTE = 1000
    settings.SKILLS_DIRS = _skills(tmp_path)
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill")
    await PermissionRule.objects.acreate(behavior="allow", rule_text="mcp__toy__read_text")
    conversation = await Conversation.objects.acreate(owner=alice, title="mcp in")
    ws = workspace_for(conversation.pk)
    server = await sync_to_async(http_server_named)(bob, http_server, everyone=True)
    await listed_and_approved(server, place_in(ws.root), alice)
    # The skill's staged copy in the workspace, read by the server from outside it.
    path = str(ws.root / "skills" / skill_folder_name("secret-notes") / "reference.md")
    fake_anthropic.enqueue(
        Reply.tool_use("Skill", {"skill": "secret-notes", "args": "q3"}, text="Loading."),
        Reply.tool_use("mcp__toy__read_text", {"path": path}, text="Reading the thresholds."),
        Reply.text("Done with the notes."),
    )
    tab = await _connect(alice, conversation.pk)
    await tab.send_json_to({"action": "resume", "after": 0})
    await _until(tab, lambda f: f["type"] == "resumed")
    await tab.send_json_to({"action": "send", "text": "use the notes skill"})
    frames = await _until(tab, lambda f: f["type"] == "run.finished", timeout=60)
    await tab.disconnect()
    assert frames[-1]["data"]["status"] == "done"
    assert "Reading the thresholds." in repr(frames)
    assert REFERENCE_MARKER not in repr(frames)
    # The server did answer with the file: the model got it, marked as untrusted output.
    results = await sync_to_async(_results)(conversation)
    read = json.dumps(results[-1]["content"])
    assert not results[-1].get("is_error") and REFERENCE_MARKER in read
    assert UNTRUSTED in read and '\\"toy\\"' in read
    sent = json.dumps(fake_anthropic.requests[-1]["messages"])
    assert REFERENCE_MARKER in sent and UNTRUSTED in sent
    # The owner's page and a reload's replayed frames withhold it; an auditor's page shows it.
    assert REFERENCE_MARKER.encode() not in await sync_to_async(_page)(alice, conversation.pk)
    tab = await _connect(alice, conversation.pk)
    await tab.send_json_to({"action": "resume", "after": 0})
    replayed = await _until(tab, lambda f: f["type"] == "resumed")
    await tab.disconnect()
    assert "Reading the thresholds." in repr(replayed) and REFERENCE_MARKER not in repr(replayed)
    audit = await sync_to_async(_page)(auditor, conversation.pk, "audit-conversation")
    assert REFERENCE_MARKER.encode() in audit


@pytest.mark.django_db(transaction=True)
async def test_arguments_quoting_hidden_skill_text_never_leave(
    alice, bob, settings, fake_anthropic, http_server, tmp_path
):
    use_fake_model(settings, fake_anthropic, retries=0)
    settings.SANDBOX = "bwrap"
    settings.SKILLS_DIRS = _skills(tmp_path)
    # Allowed by the rules, and still refused: the filter stands after every rule.
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill")
    await PermissionRule.objects.acreate(behavior="allow", rule_text="mcp__toy")
    conversation = await Conversation.objects.acreate(owner=alice, title="mcp out")
    server = await sync_to_async(http_server_named)(bob, http_server, everyone=True)
    await listed_and_approved(server, place_in(workspace_for(conversation.pk).root), alice)
    fake_anthropic.enqueue(
        Reply.tool_use("Skill", {"skill": "secret-notes", "args": "q3"}),
        Reply.tool_use("mcp__toy__touch_marker", {"label": "quoted", "note": f"{QUOTED}."}),
        Reply.tool_use("mcp__toy__touch_marker", {"label": "plain", "note": "a short note"}),
        Reply.text("done"),
    )
    run = await run_turn(conversation, "use the notes skill", alice)
    assert run.status == "done"
    assert not (http_server.folder / "marker-quoted").exists()  # the server never got the call
    assert (http_server.folder / "marker-plain").read_text() == "called\na short note"  # control
    results = await sync_to_async(_results)(conversation)
    refused = json.dumps(results[-2]["content"])
    assert results[-2]["is_error"] is True and "hidden" in refused
    decisions = [
        (d.tool, d.decision, d.source)
        async for d in PermissionDecision.objects.filter(conversation=conversation).order_by("pk")
        if d.tool.startswith("mcp__")
    ]
    assert decisions == [
        ("mcp__toy__touch_marker", "refused", "hidden"),
        ("mcp__toy__touch_marker", "allow", "admin"),
    ]
    called = [e.detail["tool"] async for e in AuditEvent.objects.filter(action="mcp.called")]
    assert called == ["touch_marker"]


@pytest.mark.django_db(transaction=True)
async def test_a_stored_env_or_header_value_never_leaves_in_arguments_and_is_masked_in_a_result(
    alice, bob, settings, fake_anthropic, http_server
):
    use_fake_model(settings, fake_anthropic, retries=0)
    settings.SANDBOX = "bwrap"
    env_value = "tk-5d1e9a70b2c4"
    header_value = "hk-8f02c6e41a93"
    await PermissionRule.objects.acreate(behavior="allow", rule_text="mcp__toy")
    await PermissionRule.objects.acreate(behavior="allow", rule_text="mcp__web")
    conversation = await Conversation.objects.acreate(owner=alice, title="mcp secrets")
    ws = workspace_for(conversation.pk)
    toy = await sync_to_async(stdio_server)(bob, everyone=True, env={"TICKETS_TOKEN": env_value})
    web = await sync_to_async(http_server_named)(
        bob,
        http_server,
        name="web",
        headers={"Authorization": f"Bearer {header_value}"},
        everyone=True,
    )
    for server in (toy, web):
        await listed_and_approved(server, place_in(ws.root), alice)
    # First turn: the stdio server answers with its environment, the env value in it. The
    # value is masked in the result, before the model or a browser sees it.
    fake_anthropic.enqueue(Reply.tool_use("mcp__toy__report_env", {}), Reply.text("done"))
    run = await run_turn(conversation, "what is your environment?", alice)
    assert run.status == "done"
    reported = json.dumps((await sync_to_async(_results)(conversation))[-1]["content"])
    # The server did answer with the variable (its key is there), its value masked.
    assert '\\"TICKETS_TOKEN\\": \\"[stored secret]\\"' in reported
    assert env_value not in reported
    assert env_value not in json.dumps(fake_anthropic.requests[-1]["messages"])
    assert env_value.encode() not in await sync_to_async(_page)(alice, conversation.pk)
    # Second turn (the listings are reused): the values in a call's arguments never leave.
    fake_anthropic.enqueue(
        # A stdio server's env value, sent to that very server and to another one.
        Reply.tool_use("mcp__toy__touch_marker", {"label": "env", "note": f"token {env_value}"}),
        Reply.tool_use("mcp__web__touch_marker", {"label": "env", "note": env_value}),
        # A header value (the token part of it), sent on.
        Reply.tool_use("mcp__toy__touch_marker", {"label": "header", "note": header_value}),
        Reply.tool_use("mcp__web__touch_marker", {"label": "plain", "note": "nothing secret"}),
        Reply.text("done"),
    )
    run = await run_turn(conversation, "use the tools", alice)
    assert run.status == "done"
    assert not (ws.root / "marker-env").exists() and not (ws.root / "marker-header").exists()
    assert not (http_server.folder / "marker-env").exists()
    assert (http_server.folder / "marker-plain").read_text() == "called\nnothing secret"  # control
    results = (await sync_to_async(_results)(conversation))[1:]
    assert [r.get("is_error", False) for r in results] == [True, True, True, False]
    assert all("stored secret" in json.dumps(r["content"]) for r in results[:3])
    refused = [
        d
        async for d in PermissionDecision.objects.filter(
            conversation=conversation, decision="refused"
        ).order_by("pk")
    ]
    assert len(refused) == 3
    # The audit keeps the refused call without the secret it carried.
    kept = json.dumps([(d.call_text, d.input, d.reason) for d in refused])
    assert env_value not in kept and header_value not in kept


def _body(user, name: str, *args: Any) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(reverse(name, args=args))
    assert response.status_code == 200, (name, response.status_code)
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content).decode()
    return response.content.decode()


@pytest.mark.django_db(transaction=True)
async def test_a_stored_secret_in_a_calls_arguments_is_masked_on_every_page_and_frame(
    alice, bob, auditor, settings, fake_anthropic, http_server
):
    """The call is refused before it leaves; its card, wherever a browser gets it, shows the
    arguments with the secret masked, while the stored row (what the model is sent back) keeps
    what the model wrote."""
    use_fake_model(settings, fake_anthropic, retries=0)
    settings.SANDBOX = "bwrap"
    secret = "hk-3b7d95e0c1f2a8"
    await PermissionRule.objects.acreate(behavior="allow", rule_text="mcp__web")
    conversation = await Conversation.objects.acreate(owner=alice, title="mcp cards")
    web = await sync_to_async(http_server_named)(
        bob, http_server, name="web", headers={"Authorization": f"Bearer {secret}"}, everyone=True
    )
    await listed_and_approved(web, place_in(workspace_for(conversation.pk).root), alice)
    fake_anthropic.enqueue(
        Reply.tool_use(
            "mcp__web__touch_marker",
            {"label": "leak", "note": f"the token is {secret}"},
            text="Sending the note.",
        ),
        Reply.text("done"),
    )
    tab = await _connect(alice, conversation.pk)
    await tab.send_json_to({"action": "resume", "after": 0})
    await _until(tab, lambda f: f["type"] == "resumed")
    await tab.send_json_to({"action": "send", "text": "send the note"})
    frames = await _until(tab, lambda f: f["type"] == "run.finished", timeout=60)
    await tab.disconnect()
    assert frames[-1]["data"]["status"] == "done"
    assert not (http_server.folder / "marker-leak").exists()  # refused, never sent
    # The live frames carried the card, its arguments masked.
    live = repr(frames)
    assert "mcp__web__touch_marker" in live and "the token is [stored secret]" in live
    assert secret not in live
    # Stored as the model wrote it, and sent back to it so (the model's own words).
    sent = json.dumps(fake_anthropic.requests[-1]["messages"])
    assert f"the token is {secret}" in sent
    tool_use_id = next(
        block["id"]
        for row in await sync_to_async(rows)(conversation)
        for block in row.content
        if block.get("type") == "tool_use"
    )
    # A reload's replayed frames, the chat page, the whole input, the exports, a share link,
    # and the auditor's pages: masked for the owner and for an inspector alike.
    tab = await _connect(alice, conversation.pk)
    await tab.send_json_to({"action": "resume", "after": 0})
    replayed = repr(await _until(tab, lambda f: f["type"] == "resumed"))
    await tab.disconnect()
    assert "the token is [stored secret]" in replayed and secret not in replayed
    _share, token = await sync_to_async(ConversationShare.create_for)(conversation, alice)
    pk = conversation.pk
    shown = {
        "page": ("conversation", pk),
        "input": ("conversation-tool-text", pk, tool_use_id, "input"),
        "jsonl": ("conversation-export", pk),
        "markdown": ("conversation-export-markdown", pk),
        "share": ("shared-conversation", token),
    }
    # An auditor (who may inspect hidden content) reads it through the share and the exports.
    inspected = ("jsonl", "markdown", "share")
    for viewer, what in [*((alice, w) for w in shown), *((auditor, w) for w in inspected)]:
        name, *args = shown[what]
        body = await sync_to_async(_body)(viewer, name, *args)
        assert "the token is [stored secret]" in body, (viewer.username, what)
        assert secret not in body, (viewer.username, what)
    # The audit's transcript shows the card masked too; its "what the model saw" keeps the
    # request as it was sent.
    audit = await sync_to_async(_body)(auditor, "audit-conversation", pk)
    assert "the token is [stored secret]" in audit


@pytest.mark.django_db
def test_the_stored_secrets_are_read_once_per_filter_and_only_for_mcp_calls(
    bob, django_assert_num_queries
):
    token = "hk-0a1b2c3d4e5f"
    servers.register(
        name="web",
        kind="http",
        registered_by=bob,
        url="https://web.example.com/mcp",
        headers={"Authorization": f"Bearer {token}"},
    )
    out = outbound(None, can_inspect=True)
    with django_assert_num_queries(0):  # another tool's input is shown as it is, unread
        assert out.call_input("Bash", {"command": f"echo {token}"}) == {"command": f"echo {token}"}
    with django_assert_num_queries(1):
        first = out.call_input("mcp__web__post", {"note": token})
        second = out.call_input("mcp__web__get", {"notes": [f"a {token}"]})
    assert (first, second) == ({"note": "[stored secret]"}, {"notes": ["a [stored secret]"]})
