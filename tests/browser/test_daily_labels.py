"""Issue 42, points 2 and 6, in Chromium at 1280x800 and 390x844: the Skills page says what a
bundled skill's commands will do for this person (and why), and the chat shows workspace paths
where the model's answer and a tool's output name the server's folder."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.axe import violations
from tests.browser.pages import screenshot
from tests.support.fake_anthropic import Reply

pytestmark = pytest.mark.browser

VIEWPORTS = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}


@pytest.mark.parametrize("size", VIEWPORTS)
def test_skill_labels_and_workspace_paths(tab, model, chat_server, size):
    viewport = VIEWPORTS[size]
    chat = tab("alice", width=viewport["width"], height=viewport["height"])
    page = chat.page

    # Point 2: text-stats' command is covered by its allowed-tools: it runs without asking.
    page.goto(f"{chat.base_url}/skills/")
    row = page.locator('tr.catalog-row[data-skill="text-stats"]')
    expect(row.locator("[data-outlook]")).to_have_text("runs its reviewed commands without asking")
    expect(row).to_contain_text("because of its own allowed-tools")
    expect(row).not_to_contain_text("asks first")
    row.scroll_into_view_if_needed()
    screenshot(page, f"42-skill-labels-{size}")
    assert violations(page) == []

    # Point 6: the server's folder becomes the workspace path in what the person reads.
    conversation = chat.new_conversation()
    root = (chat_server.config.var_dir / "workspaces" / str(conversation)).resolve()
    model.enqueue(
        Reply.tool_use("Read", {"file_path": f"{root}/out/stats.json"}),
        Reply.text(f"I could not read `{root}/out/stats.json`: it is not there yet."),
    )
    chat.send("Read the counts")
    answer = chat.transcript.locator(".row-assistant .md").last
    expect(answer).to_have_text("I could not read out/stats.json: it is not there yet.")
    card = chat.transcript.locator(".tool").first
    expect(card).to_contain_text("out/stats.json")
    card.locator("summary").first.click()
    result = card.locator(".tool-result summary")
    result.click()
    expect(card.locator(".tool-output")).to_be_visible()
    assert str(root) not in page.content()
    assert "workspaces" not in page.content()
    # The model was sent the path whole.
    assert f"{root}/out/stats.json" in str(model.requests[-1]["messages"])
    screenshot(page, f"42-workspace-paths-{size}")
    assert violations(page) == []
