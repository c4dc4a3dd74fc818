"""An MCP server from the admin to the audit in a real browser, at 1280 and 390 px: admin A adds
the toy server over Streamable HTTP, admin B reviews and approves its `echo` tool, alice (in the
server's group) approves the model's call in the chat and reads the result, and the auditor
finds the call and the ask rule that decided it; admin A then removes the server, and the
auditor still reads the call."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.axe import violations
from tests.browser.live_server import LiveServer
from tests.browser.pages import screenshot
from tests.browser.server_data import ADMIN, create_admin, run_in_server
from tests.support.fake_anthropic import Reply

pytestmark = pytest.mark.browser

REVIEWER = ("browser-admin-b", "browser-admin-b-pass-123")
GROUP = "mcp-users"
HEADER_SECRET = "toy-header-secret-61c0de"

_SETUP = """
from django.contrib.auth.models import Group, User
from skills_app.models import PermissionRule
if not User.objects.filter(username={reviewer!r}).exists():
    User.objects.create_superuser({reviewer!r}, password={password!r})
group, _ = Group.objects.get_or_create(name={group!r})
group.user_set.add(User.objects.get(username="alice"))
PermissionRule.objects.get_or_create(behavior="ask", rule_text={rule!r})
"""


def _signed_in(browser: Browser, base: str, user: tuple[str, str], width: int) -> Page:
    page = browser.new_context(viewport={"width": width, "height": 900}).new_page()
    page.goto(f"{base}/accounts/login/")
    page.get_by_label("Username").fill(user[0])
    page.get_by_label("Password").fill(user[1])
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("textbox", name="Message")).to_be_visible()
    return page


@pytest.mark.parametrize("width", [1280, 390])
def test_an_mcp_server_is_added_reviewed_used_with_approval_and_audited(
    browser, tab, model, chat_server: LiveServer, toy_mcp_url, width
):
    name = f"toy-{width}"
    tool = f"mcp__{name}__echo"
    base = chat_server.url
    create_admin(chat_server)
    run_in_server(
        chat_server,
        _SETUP.format(reviewer=REVIEWER[0], password=REVIEWER[1], group=GROUP, rule=tool),
    )

    # Admin A adds the server; the header's value is never shown back.
    adder = _signed_in(browser, base, ADMIN, width)
    adder.goto(f"{base}/admin/skills_app/mcpserver/add/")
    adder.get_by_label("Name:", exact=True).fill(name)
    adder.get_by_label("Streamable HTTP").check()
    adder.get_by_label("URL:", exact=True).fill(toy_mcp_url)
    adder.get_by_label("Headers").fill(f"Authorization: Bearer {HEADER_SECRET}")
    adder.get_by_label(GROUP).check()
    if width == 1280:
        assert violations(adder) == []
    screenshot(adder, f"mcp-{width}-1-add-form")
    adder.get_by_role("button", name="Save", exact=True).click()
    messages = adder.locator("ul.messagelist")
    expect(messages).to_contain_text(f'Registered "{name}" (http).')
    expect(messages).to_contain_text(f'"{name}" lists 12 tools.')
    expect(adder.locator(".field-header_names")).to_contain_text("Authorization")
    assert HEADER_SECRET not in adder.content()
    screenshot(adder, f"mcp-{width}-2-added")

    # Admin B reads the echo tool's definition whole and approves it.
    reviewer = _signed_in(browser, base, REVIEWER, width)
    reviewer.goto(f"{base}/admin/skills_app/mcpserver/")
    reviewer.get_by_role("link", name=name, exact=True).click()
    reviewer.locator("#review-link").click()
    echo = reviewer.locator("section.mcp-definition").filter(
        has=reviewer.get_by_role("heading", name="echo")
    )
    expect(echo).to_contain_text("Repeat the text back.")
    expect(echo).to_contain_text('"required": [')
    if width == 1280:
        assert violations(reviewer) == []
    echo.get_by_label("Review echo as shown").check()
    screenshot(reviewer, f"mcp-{width}-3-review")
    reviewer.get_by_role("button", name="Approve the ticked definitions").click()
    expect(reviewer.locator("ul.messagelist")).to_contain_text("Approved: echo.")
    reviewer.context.close()

    # Alice's model calls the tool; the ask rule asks her; she allows it and sees the result.
    model.enqueue(
        Reply.tool_use(tool, {"text": f"hello from {width}"}, id=f"toolu_mcp{width}"),
        Reply.text("The server answered."),
    )
    chat = tab("alice", width=width)
    chat.new_conversation()
    chat.send("Ask the toy server to echo")
    approval = chat.approval()
    expect(approval).to_contain_text(tool)
    expect(approval).to_contain_text(f"hello from {width}")
    screenshot(chat.page, f"mcp-{width}-4-approval")
    approval.get_by_role("button", name="Allow once").click()
    card = chat.transcript.locator(f'.tool[data-tool="{tool}"]')
    result = card.locator(".tool-result")
    result.locator("summary").click()
    expect(result.locator(".tool-output")).to_contain_text(f"echo: hello from {width}")
    expect(chat.transcript.locator(".row-assistant .md").last).to_have_text("The server answered.")
    screenshot(chat.page, f"mcp-{width}-5-result")
    assert f"echo: hello from {width}" in str(model.requests[-1]["messages"][-1])

    # The auditor finds the call and the rule that decided it.
    audit = tab("audrey", width=width).page
    audit.goto(f"{base}/audit/decisions/?rule={tool}")
    row = audit.locator("tbody tr").filter(has_text="answered by alice")
    expect(row).to_have_count(1)
    expect(row.locator('td[data-label="Call"]')).to_have_text(tool)
    expect(row.locator('td[data-label="Decided by"]')).to_contain_text(
        f"approved once by alice (asked: {tool})"
    )
    expect(row.locator('td[data-label="Rule"]')).to_contain_text(tool)
    screenshot(audit, f"mcp-{width}-6-audit")
    row.locator('td[data-label="Time"] a').click()
    expect(audit.get_by_text(f"echo: hello from {width}").first).to_be_attached()

    # Admin A removes the server after a page saying what goes and what stays.
    adder.reload()
    adder.get_by_role("link", name="Delete").click()
    expect(adder.locator("#goes")).to_contain_text("Its 14 definitions (2 of prompts)")
    expect(adder.locator("#stays")).to_contain_text("1 recorded call")
    if width == 1280:
        assert violations(adder) == []
    screenshot(adder, f"mcp-{width}-7-remove")
    adder.get_by_role("button", name=f"Remove {name}").click()
    expect(adder.locator("ul.messagelist")).to_contain_text(f'Removed "{name}".')
    expect(adder.get_by_role("link", name=name, exact=True)).to_have_count(0)
    adder.context.close()
    audit.goto(f"{base}/audit/decisions/?rule={tool}")
    expect(audit.locator("tbody tr").filter(has_text="answered by alice")).to_have_count(1)
