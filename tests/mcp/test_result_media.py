"""Images and embedded resources in a tool's result, against the toy server over HTTP: the
person gets them as files of the conversation (an image shown in the tool's card, a resource as
a download), within a size cap and a list of safe types; the model gets a note naming each, and
an embedded text resource's text through the same filter as any result text."""

from __future__ import annotations

import base64

import pytest
from asgiref.sync import sync_to_async
from django.template.loader import render_to_string
from django.urls import reverse

from skills_app.chat.tool_cards import tool_result_context
from skills_app.core.mcp import McpTool, ServerSpec, list_tools
from skills_app.core.tools import ToolContext
from skills_app.mcp.transport import http_client
from skills_app.models import Conversation, PermissionRule
from skills_app.visibility import outbound
from skills_app.workspaces import workspace_for
from tests.mcp.test_mcp import http_server_named, listed_and_approved, place_in
from tests.mcp.toy_server import ONE_PIXEL_PNG
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import accepted, run_turn, use_fake_model


async def _picture(http_server, ws, **limits):
    spec = ServerSpec(name="web", kind="http", url=http_server.url, http_clients=http_client)
    defs = {d.name: d for d in await list_tools(spec, place_in(ws.root))}
    tool = McpTool(spec, defs["picture"], result_limit=10_000, **limits)
    return await tool.run({}, ToolContext(workspace=ws, sandbox="bwrap"))


@pytest.mark.django_db(transaction=True)
async def test_an_image_and_a_resource_become_files_of_the_conversation(alice, http_server):
    conversation = await Conversation.objects.acreate(owner=alice, title="t")
    ws = await sync_to_async(workspace_for)(conversation.pk)
    result = await _picture(http_server, ws)
    assert not result.is_error
    png, notes = result.artifacts
    assert png.startswith("out/") and png.endswith(".png")
    assert notes.startswith("out/") and notes.endswith(".md")
    assert (ws.root / png).read_bytes() == base64.b64decode(ONE_PIXEL_PNG)
    assert (ws.root / notes).read_text() == "# Notes\nThe chart shows one pixel."
    # The model: a note for each file, the resource's text, and nothing of the bytes.
    assert "Here is the chart." in result.content
    assert f"[image/png, 70 bytes: shown to the person as {png}]" in result.content
    assert "The chart shows one pixel." in result.content
    assert ONE_PIXEL_PNG[:20] not in result.content
    # The SVG is not a kept type: named, not saved.
    assert "[image/svg+xml: not kept, not a type Skillscope shows]" in result.content
    assert not any(p.endswith(".svg") for p in result.artifacts)
    # The person: the card shows the image inline and the resource as a download.
    out = await sync_to_async(outbound)(conversation.pk, can_inspect=False)
    context = await sync_to_async(tool_result_context)(
        conversation.pk, {"content": result.content, "artifacts": list(result.artifacts)}, out=out
    )
    html = await sync_to_async(render_to_string)(
        "skills_app/chat/_tool_result.html", {"r": context, "tool_use_id": "t1"}
    )
    assert f'<img src="/c/{conversation.pk}/files/{png}"' in html
    assert f'href="/c/{conversation.pk}/files/{notes}" download' in html


async def test_a_file_over_the_cap_is_named_not_kept(http_server, tmp_path):
    from skills_app.core.tools import Workspace

    ws = Workspace(tmp_path / "ws")
    result = await _picture(http_server, ws, media_limit=20)
    assert result.artifacts == ()
    assert "[image/png, 70 bytes: not kept, larger than the 20 bytes a file may be]" in (
        result.content
    )
    assert "The chart shows one pixel." in result.content  # its text still reaches the model


@pytest.mark.django_db(transaction=True)
async def test_the_model_gets_the_image_itself_in_the_tool_result(
    alice, bob, settings, fake_anthropic, http_server, client
):
    use_fake_model(settings, fake_anthropic)
    conversation = await Conversation.objects.acreate(owner=alice, title="mcp")
    server = await sync_to_async(http_server_named)(bob, http_server, everyone=True)
    await listed_and_approved(server, place_in(workspace_for(conversation.pk).root), alice)
    await PermissionRule.objects.acreate(behavior="allow", rule_text="mcp__toy__picture")
    fake_anthropic.enqueue(Reply.tool_use("mcp__toy__picture", {}), Reply.text("A pixel."))
    await run_turn(conversation, "draw", alice)
    sent = accepted(fake_anthropic)[1]["messages"][-1]["content"]
    (result,) = [b for b in sent if b["type"] == "tool_result"]
    kinds = [b["type"] for b in result["content"]]
    assert kinds == ["text", "image"]
    assert result["content"][1]["source"] == {
        "type": "base64",
        "media_type": "image/png",
        "data": ONE_PIXEL_PNG,
    }
    assert "shown to the person as out/toy-picture.png" in result["content"][0]["text"]
    # The person's page shows the card's text and the image file, never the image's base64.
    await sync_to_async(client.force_login)(alice)
    page = await sync_to_async(client.get)(reverse("conversation", args=[conversation.pk]))
    html = page.content.decode()
    assert "shown to the person as out/toy-picture.png" in html
    assert ONE_PIXEL_PNG[:24] not in html
    assert f'<img src="/c/{conversation.pk}/files/out/toy-picture.png"' in html
