"""An MCP server's prompt in the chat's `/` menu, at 1280 and 390 px: alice types `/`, finds the
toy server's `brief` prompt with its arguments, takes it, gives a topic, and the prompt's text
becomes her turn, answered by the model."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.live_server import LiveServer
from tests.browser.pages import screenshot
from tests.browser.server_data import run_in_server
from tests.support.fake_anthropic import Reply

pytestmark = pytest.mark.browser

# Registered by mona, its tools approved by rita (another person), open to everyone; removed
# after the test, so no other test's menu lists a server that is gone.
_REGISTER = """
from django.contrib.auth.models import User
from skills_app.mcp import definitions, servers
server = servers.register(
    name={name!r}, kind="http", url={url!r}, everyone=True,
    registered_by=User.objects.get(username="mona"),
)
definitions.list_now(server)
definitions.review(server, approve=True, reviewer=User.objects.get(username="rita"))
"""
_REMOVE = """
from skills_app.models import McpServer
McpServer.objects.filter(name={name!r}).delete()
"""


@pytest.mark.parametrize("width", [1280, 390])
def test_an_mcp_prompt_is_in_the_slash_menu_and_becomes_the_turn(
    tab, model, chat_server: LiveServer, toy_mcp_url, width
):
    name = f"pr{width}"
    command = f"/mcp__{name}__brief"
    run_in_server(chat_server, _REGISTER.format(name=name, url=toy_mcp_url))
    try:
        model.enqueue(Reply.text("Otters hold hands while they sleep."))
        chat = tab("alice", width=width)
        chat.new_conversation()
        box = chat.message_box
        box.click()
        box.press_sequentially(f"/mcp__{name}")
        menu = chat.page.get_by_role("listbox", name="Skills")
        option = menu.get_by_role("option").filter(has_text=command)
        expect(option).to_contain_text("topic=… [tone=…]")
        expect(option).to_contain_text("A short brief about a topic, in a tone.")
        screenshot(chat.page, f"mcp-prompt-{width}-1-menu")
        box.press("Enter")
        expect(box).to_have_value(f"{command} ")
        box.press_sequentially("otters tone=calm")
        box.press("Enter")
        wanted = "Write a calm brief about otters, in three sentences."
        expect(chat.transcript.locator(".row-user .bubble")).to_have_text(wanted)
        expect(chat.transcript.locator(".row-assistant .md").last).to_have_text(
            "Otters hold hands while they sleep."
        )
        screenshot(chat.page, f"mcp-prompt-{width}-2-turn")
        assert wanted in str(model.requests[-1]["messages"][-1])
    finally:
        run_in_server(chat_server, _REMOVE.format(name=name))
