"""Issue 42, point 15, in Chromium: rating an answer with a note, and pinning a conversation,
at 1280x800 and then 390x844 (one flow, the window narrowed half-way)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.axe import violations
from tests.browser.pages import screenshot
from tests.support.fake_anthropic import Reply

pytestmark = pytest.mark.browser


def test_rating_an_answer_with_a_note_and_pinning_the_conversation(tab, model):
    model.enqueue(Reply.text("Pack light: three shirts will do."))
    chat = tab("alice", width=1280, height=800)
    conversation_id = chat.new_conversation()
    chat.send("How many shirts for a week away?")
    row = chat.transcript.locator(".row-assistant")
    expect(row.locator(".md")).to_have_text("Pack light: three shirts will do.")

    good = row.get_by_role("button", name="Good answer")
    bad = row.get_by_role("button", name="Bad answer")
    expect(bad).to_have_attribute("aria-pressed", "false")
    bad.click()
    expect(bad).to_have_attribute("aria-pressed", "true")
    expect(good).to_have_attribute("aria-pressed", "false")
    note = row.get_by_role("textbox", name="What went wrong? (optional, at most 500 characters)")
    note.fill("Forgot the <socks> entirely")
    screenshot(chat.page, "42-feedback-note-desktop")
    assert violations(chat.page) == []
    row.get_by_role("button", name="Save note").click()
    expect(row.locator(".feedback-note summary")).to_have_text("Your note")

    # Stored: a reload shows the rating pressed and the note as typed (as text, not markup).
    chat.reload()
    row = chat.transcript.locator(".row-assistant")
    expect(row.get_by_role("button", name="Bad answer")).to_have_attribute("aria-pressed", "true")
    row.locator(".feedback-note summary").click()
    expect(row.get_by_role("textbox")).to_have_value("Forgot the <socks> entirely")
    assert chat.errors == []

    # On a phone: pin the conversation from its menu; the sidebar lists it under "Pinned".
    chat.page.set_viewport_size({"width": 390, "height": 844})
    chat.page.get_by_role("button", name="Pin", exact=True).click()
    expect(chat.page.get_by_role("button", name="Unpin", exact=True)).to_be_visible()
    screenshot(chat.page, "42-feedback-pinned-phone")
    chat.page.get_by_role("button", name="Conversations", exact=True).click()
    sidebar = chat.page.locator("#sidebar-list")
    expect(sidebar.locator("h2").first).to_have_text("Pinned")
    expect(sidebar.locator("ul").first.locator("a")).to_have_attribute(
        "href", f"/c/{conversation_id}/"
    )
    screenshot(chat.page, "42-pinned-sidebar-phone")
    assert violations(chat.page) == []
