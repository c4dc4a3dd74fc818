"""An MCP server's question mid-call answered in the chat, at 1280 and 390 px: the model calls
the toy server's `ask_colour`, the card names the server and shows its colour field, alice
types "teal" and accepts, and the tool's result says the server got it."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.live_server import LiveServer
from tests.browser.pages import screenshot
from tests.browser.server_data import run_in_server
from tests.support.fake_anthropic import Reply

pytestmark = pytest.mark.browser

# Registered by mona, its tools approved by rita, open to everyone, ask_colour allowed by a
# rule; removed after the test.
_REGISTER = """
from django.contrib.auth.models import User
from skills_app.mcp import definitions, servers
from skills_app.models import PermissionRule
server = servers.register(
    name={name!r}, kind="http", url={url!r}, everyone=True,
    registered_by=User.objects.get(username="mona"),
)
definitions.list_now(server)
definitions.review(server, approve=True, reviewer=User.objects.get(username="rita"))
PermissionRule.objects.create(behavior="allow", rule_text="mcp__{name}__ask_colour")
"""
_REMOVE = """
from skills_app.models import McpServer, PermissionRule
PermissionRule.objects.filter(rule_text="mcp__{name}__ask_colour").delete()
McpServer.objects.filter(name={name!r}).delete()
"""


@pytest.mark.parametrize("width", [1280, 390])
def test_a_servers_question_is_answered_in_the_chat(
    tab, model, chat_server: LiveServer, toy_mcp_url, width
):
    name = f"el{width}"
    run_in_server(chat_server, _REGISTER.format(name=name, url=toy_mcp_url))
    try:
        model.enqueue(Reply.tool_use(f"mcp__{name}__ask_colour", {}), Reply.text("Teal it is."))
        chat = tab("alice", width=width)
        chat.new_conversation()
        chat.message_box.fill("Which colour for the report?")
        chat.message_box.press("Enter")
        card = chat.page.get_by_role("group", name=f"Question from the MCP server {name}")
        expect(card).to_contain_text(f"The MCP server “{name}” asks")
        expect(card).to_contain_text("Which colour should the report use?")
        field = card.get_by_role("textbox")
        expect(field).to_be_visible()
        screenshot(chat.page, f"mcp-elicit-{width}-1-card")
        field.fill("teal")
        card.get_by_role("button", name="Accept").click()
        outcome = chat.page.locator(".elicitation[data-status='accept']")
        expect(outcome).to_contain_text("accepted")
        expect(chat.transcript.locator(".row-assistant .md").last).to_have_text("Teal it is.")
        screenshot(chat.page, f"mcp-elicit-{width}-2-answered")
        assert "elicitation answer: accept, colour teal" in str(model.requests[-1]["messages"])
    finally:
        run_in_server(chat_server, _REMOVE.format(name=name))
