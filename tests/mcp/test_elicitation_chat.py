"""A server's question mid-call asked in the chat: the card over the websocket, the person's
answer (accept with values, decline, cancel by timeout), a secret never asked for; against the
toy HTTP server run for real, the real SDK against the fake Anthropic server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from skills_app.models import Conversation, McpElicitation, PermissionRule, Run
from skills_app.runs import supervisor as runs
from skills_app.workspaces import workspace_for
from tests.mcp.test_mcp import http_server_named, listed_and_approved, place_in
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import rows, use_fake_model
from tests.support.ws_helpers import until
from webapp.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)


def _cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


async def _tab(user, conversation_id: int) -> WebsocketCommunicator:
    cookie = await sync_to_async(_cookie)(user)
    tab = WebsocketCommunicator(
        application,
        f"/ws/conversations/{conversation_id}/",
        headers=[(b"origin", b"http://127.0.0.1"), (b"cookie", f"sessionid={cookie}".encode())],
    )
    connected, _code = await tab.connect(timeout=10)
    assert connected
    await tab.send_json_to({"action": "resume", "after": 0})
    await until(tab, lambda f: f["type"] == "resumed")
    return tab


def _asked(frames: list[dict[str, Any]]) -> dict[str, Any]:
    return [f for f in frames if f["type"] == "elicitation.asked"][-1]


def _id(frame: dict[str, Any]) -> int:
    return int(frame["data"]["elicitation_id"])


def _page(user, conversation_id: int) -> str:
    client = Client()
    client.force_login(user)
    return client.get(f"/c/{conversation_id}/").content.decode()


def _results(conversation) -> list[str]:
    return [
        json.dumps(block["content"])
        for row in rows(conversation)
        if row.kind == "tool_result"
        for block in row.content
    ]


async def test_the_person_answers_a_servers_question_in_the_chat(
    alice, bob, settings, fake_anthropic, http_server
):
    use_fake_model(settings, fake_anthropic, retries=0)
    conversation = await Conversation.objects.acreate(owner=alice, title="asks")
    server = await sync_to_async(http_server_named)(bob, http_server, everyone=True)
    await listed_and_approved(server, place_in(workspace_for(conversation.pk).root), alice)
    await PermissionRule.objects.acreate(behavior="allow", rule_text="mcp__toy__ask_*")
    fake_anthropic.enqueue(
        Reply.tool_use("mcp__toy__ask_colour", {}),
        Reply.tool_use("mcp__toy__ask_colour", {}),
        Reply.tool_use("mcp__toy__ask_password", {}),
        Reply.text("done"),
    )
    tab = await _tab(alice, conversation.pk)
    await tab.send_json_to({"action": "send", "text": "pick a colour"})
    card = _asked(await until(tab, lambda f: f["type"] == "elicitation.asked"))
    assert card["data"]["status"] == "pending"
    # The card (the same partial a reload shows): the question waiting, with its form.
    first = _id(card)
    page = await sync_to_async(_page)(alice, conversation.pk)
    assert f'id="elicitation-{first}"' in page
    assert "The MCP server “toy” asks" in page and "Which colour should the report use?" in page
    assert 'name="value.colour"' in page and "required" in page
    for answer in ("Accept", "Decline", "Cancel"):
        assert f">{answer}</button>" in page
    # A required field left empty is refused, and the question stays open.
    await tab.send_json_to(
        {"action": "elicit", "elicitation_id": str(first), "answer": "accept", "value.colour": ""}
    )
    refused = await until(tab, lambda f: f["type"] == "error")
    assert "is required" in refused[-1]["message"]
    await tab.send_json_to(
        {
            "action": "elicit",
            "elicitation_id": str(first),
            "answer": "accept",
            "value.colour": "teal",
        }
    )
    frames = await until(tab, lambda f: f["type"] == "elicitation.asked")
    answered = [f for f in frames if f["type"] == "elicitation.answered"]
    assert answered[0]["data"] == {"elicitation_id": first, "status": "accept"}
    assert "teal" not in repr(answered[0]), "the answer's values are not sent back"
    second = _asked(frames)
    await tab.send_json_to(
        {"action": "elicit", "elicitation_id": str(_id(second)), "answer": "decline"}
    )
    # The password question is never a form: shown declined, with why.
    frames = await until(tab, lambda f: f["type"] == "elicitation.asked")
    secret = _asked(frames)
    assert secret["data"]["status"] == "decline"
    await until(tab, lambda f: f["type"] == "run.finished")
    await tab.disconnect()
    for run in [r async for r in Run.objects.filter(conversation=conversation)]:
        await runs.wait_for_run(run.pk, timeout=15)
    results = await sync_to_async(_results)(conversation)
    assert "elicitation answer: accept, colour teal" in results[0]
    assert "The person accepted and sent their answer." in results[0]
    assert "elicitation answer: decline" in results[1] and "The person declined." in results[1]
    assert "elicitation answer: decline" in results[2] and "looks like a secret" in results[2]
    kept = [
        (e.status, e.values, e.answered_by_id)
        async for e in McpElicitation.objects.filter(conversation=conversation).order_by("pk")
    ]
    assert kept == [
        ("accept", {"colour": "teal"}, alice.pk),
        ("decline", {}, alice.pk),
        ("decline", {}, None),
    ]
    secret_row = await McpElicitation.objects.aget(pk=_id(secret))
    assert "looks like a secret" in secret_row.why


async def test_a_question_nobody_answers_is_cancelled(
    alice, bob, settings, fake_anthropic, http_server
):
    use_fake_model(settings, fake_anthropic, retries=0)
    settings.MCP_ELICIT_TIMEOUT = 0.5
    conversation = await Conversation.objects.acreate(owner=alice, title="asks")
    server = await sync_to_async(http_server_named)(bob, http_server, everyone=True)
    await listed_and_approved(server, place_in(workspace_for(conversation.pk).root), alice)
    await PermissionRule.objects.acreate(behavior="allow", rule_text="mcp__toy__ask_colour")
    fake_anthropic.enqueue(Reply.tool_use("mcp__toy__ask_colour", {}), Reply.text("done"))
    run = await runs.start_run(conversation.pk, "pick", user_id=alice.pk)
    await runs.wait_for_run(run.pk, timeout=30)
    [result] = await sync_to_async(_results)(conversation)
    assert "elicitation answer: cancel" in result
    assert "Cancelled (nobody answered within 0.5 seconds)" in result
    [row] = [e async for e in McpElicitation.objects.filter(conversation=conversation)]
    assert row.status == "cancel" and row.answered_by_id is None


async def test_stop_cancels_a_question_waiting_for_its_answer(
    alice, bob, settings, fake_anthropic, http_server
):
    use_fake_model(settings, fake_anthropic, retries=0)
    conversation = await Conversation.objects.acreate(owner=alice, title="asks")
    server = await sync_to_async(http_server_named)(bob, http_server, everyone=True)
    await listed_and_approved(server, place_in(workspace_for(conversation.pk).root), alice)
    await PermissionRule.objects.acreate(behavior="allow", rule_text="mcp__toy__ask_colour")
    fake_anthropic.enqueue(Reply.tool_use("mcp__toy__ask_colour", {}), Reply.text("done"))
    tab = await _tab(alice, conversation.pk)
    await tab.send_json_to({"action": "send", "text": "pick"})
    card = _asked(await until(tab, lambda f: f["type"] == "elicitation.asked"))
    await tab.send_json_to({"action": "stop"})
    frames = await until(tab, lambda f: f["type"] == "run.finished")
    answered = [f for f in frames if f["type"] == "elicitation.answered"]
    assert answered and answered[-1]["data"] == {"elicitation_id": _id(card), "status": "cancel"}
    await tab.disconnect()
    row = await McpElicitation.objects.aget(pk=_id(card))
    assert row.status == "cancel" and row.why == "the run was stopped"
