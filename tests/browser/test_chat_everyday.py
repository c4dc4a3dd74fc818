"""A chat people reach for every day (issue 29), in Chromium at 1440x900 and 390x844: a clean stop,
the composer that says when the answer waits for the person, copy buttons, Markdown while it
streams, the first screen, titles and times, editing an earlier message, jump to the newest."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.pages import ChatPage, screenshot
from tests.fake_anthropic import Reply

pytestmark = pytest.mark.browser

VIEWPORTS = {"desktop": {"width": 1440, "height": 900}, "phone": {"width": 390, "height": 844}}


def open_chat(tab, size: str, username: str = "alice") -> ChatPage:
    viewport = VIEWPORTS[size]
    return tab(username, width=viewport["width"], height=viewport["height"])


def user_blocks(request) -> list[dict]:
    """The content blocks of a request's last (user) message."""
    last = request["messages"][-1]
    assert last["role"] == "user"
    return last["content"]


@pytest.mark.parametrize("size", VIEWPORTS)
def test_stop_withdraws_the_question_marks_the_chip_and_the_next_message_is_answered(
    tab, model, size
):
    model.enqueue(
        Reply.tool_use("Skill", {"skill": "browser-ask", "args": "draft.md"}, id=f"toolu_st{size}"),
        Reply.text("A haiku instead: spring rain on the roof."),
    )
    chat = open_chat(tab, size)
    chat.new_conversation()
    chat.send("Check my draft")
    approval = chat.approval()
    expect(approval.get_by_role("button", name="Allow once")).to_be_visible()
    chip = chat.chip("browser-ask")
    expect(chip).to_have_attribute("data-state", "loading")

    chat.page.get_by_role("button", name="Stop").click()
    chat.wait_run_finished()
    expect(approval.get_by_role("button")).to_have_count(0)
    expect(approval).to_have_attribute("data-status", "cancelled")
    expect(approval).to_contain_text("withdrawn: the answer stopped before anyone answered")
    expect(chip).to_have_attribute("data-state", "stopped")
    expect(chip.locator(".chip-text")).to_have_text(
        'The "browser-ask" skill was stopped before it loaded'
    )
    note = chat.transcript.locator(".row-notice").filter(has_text="Stopped.")
    expect(note).to_have_count(1)
    screenshot(chat.page, f"29-stopped-{size}")

    # A reload shows the same clean end: no buttons, the chip stopped, the note kept.
    chat.reload()
    expect(chat.approval().get_by_role("button")).to_have_count(0)
    expect(chat.chip("browser-ask")).to_have_attribute("data-state", "stopped")
    expect(chat.transcript.locator(".row-notice").filter(has_text="Stopped.")).to_have_count(1)

    chat.send("Write a haiku instead")
    expect(chat.transcript.locator(".row-assistant .md").last).to_have_text(
        "A haiku instead: spring rain on the roof."
    )
    blocks = user_blocks(model.requests[-1])
    closed = [b for b in blocks if b.get("type") == "tool_result"]
    assert [b["tool_use_id"] for b in closed] == [f"toolu_st{size}"]
    assert closed[0]["content"].startswith("Stopped by the user before this tool call finished")
    assert blocks[-1]["text"] == "Write a haiku instead"
    assert chat.errors == []
