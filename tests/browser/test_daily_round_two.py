"""Daily use, round two (issue 42), in Chromium at 1280x800 and 390x844: an edit behaves like
the composer (Enter sends it, Shift+Enter adds a line) and closes when something else replaces
what it would have answered (Regenerate, a new message)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.pages import ChatPage, screenshot
from tests.support.fake_anthropic import Reply

pytestmark = pytest.mark.browser

VIEWPORTS = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}


def open_chat(tab, size: str, username: str = "alice") -> ChatPage:
    viewport = VIEWPORTS[size]
    return tab(username, width=viewport["width"], height=viewport["height"])


def last_user_text(request) -> str:
    last = request["messages"][-1]
    assert last["role"] == "user"
    return "".join(b.get("text", "") for b in last["content"] if b.get("type") == "text")


@pytest.mark.parametrize("size", VIEWPORTS)
def test_enter_sends_an_edit_and_regenerate_or_a_new_message_closes_an_open_one(tab, model, size):
    model.enqueue(
        Reply.text("Answer to the typo."),
        Reply.text("Answer to the edit."),
        Reply.text("A regenerated answer."),
        Reply.text("Answer to the next question."),
    )
    chat = open_chat(tab, size)
    chat.new_conversation()
    answers = chat.transcript.locator(".row-assistant:not(.replaced) .md")
    chat.send("Frist question")
    expect(answers).to_have_text(["Answer to the typo."])

    # Enter sends the edit; Shift+Enter only adds a line.
    row = chat.transcript.locator(".row-user:not(.replaced)")
    row.get_by_role("button", name="Edit", exact=True).click()
    box = row.get_by_role("textbox", name="Edited message")
    expect(box).to_be_focused()
    expect(box).to_have_accessible_description(
        "Enter sends, Shift+Enter adds a line, Escape cancels."
    )
    box.fill("First question")
    chat.page.keyboard.press("Shift+Enter")
    chat.page.keyboard.type("and a second line")
    expect(box).to_have_value("First question\nand a second line")
    screenshot(chat.page, f"42-edit-open-{size}")
    chat.page.keyboard.press("Enter")
    expect(answers).to_have_text(["Answer to the edit."])
    expect(chat.transcript.locator(".edit-form")).to_have_count(0)
    assert last_user_text(model.requests[-1]) == "First question\nand a second line"

    # An edit left open closes when the answer is regenerated.
    row = chat.transcript.locator(".row-user:not(.replaced)")
    row.get_by_role("button", name="Edit", exact=True).click()
    row.get_by_role("textbox", name="Edited message").fill("Never sent")
    chat.transcript.get_by_role("button", name="Regenerate").click()
    expect(answers).to_have_text(["A regenerated answer."])
    expect(chat.page.locator("#chat .edit-form")).to_have_count(0)

    # ... and when a new message is sent from the composer.
    row.get_by_role("button", name="Edit", exact=True).click()
    expect(row.get_by_role("textbox", name="Edited message")).to_be_visible()
    composer = chat.page.locator("#message-input")
    composer.fill("Next question")
    composer.press("Enter")
    expect(answers).to_have_text(["A regenerated answer.", "Answer to the next question."])
    expect(chat.page.locator("#chat .edit-form")).to_have_count(0)
    assert "Never sent" not in str(model.requests)
    screenshot(chat.page, f"42-edit-closed-{size}")
    assert chat.errors == []
