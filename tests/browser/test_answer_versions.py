"""Issue 42, points 7 and 8, in Chromium at 1280x800 and then 390x844 (one flow, the window
narrowed half-way): a turn that loads a skill between two texts has one action row, and a
regenerated answer is a version beside the old one ("‹ 2/2 ›"), the old one a click away."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.axe import violations
from tests.browser.pages import screenshot
from tests.support.fake_anthropic import Reply

pytestmark = pytest.mark.browser


def test_one_action_row_per_answer_and_versions_of_a_regenerated_one(tab, model):
    model.enqueue(
        Reply.tool_use("Skill", {"skill": "browser-probe", "args": "3.1.0"}, text="Let me check."),
        Reply.text("Version 3.1.0 is fine."),
        Reply.text("Yes: 3.1.0 is fine."),
    )
    chat = tab("alice", width=1280, height=800)
    chat.new_conversation()
    chat.send("Is version 3.1.0 fine?")
    chat.wait_run_finished(timeout=20)
    rows = chat.transcript.locator(".row-assistant")
    expect(rows.locator(".md")).to_have_text(["Let me check.", "Version 3.1.0 is fine."])
    # Streamed live: one action row, under the answer's last bubble.
    actions = chat.transcript.locator(".answer-actions")
    expect(actions).to_have_count(1)
    expect(chat.transcript.locator(".usage")).to_have_count(1)
    expect(chat.transcript.get_by_role("button", name="Copy answer")).to_have_count(1)
    expect(rows.last.locator(".answer-actions")).to_have_count(1)
    screenshot(chat.page, "42-one-footer-desktop")
    chat.reload()
    expect(chat.transcript.locator(".answer-actions")).to_have_count(1)
    expect(chat.transcript.locator(".usage")).to_have_count(1)

    chat.transcript.get_by_role("button", name="Regenerate").click()
    expect(chat.transcript.locator(".md").filter(has_text="Yes: 3.1.0 is fine.")).to_be_visible()
    chat.wait_run_finished(count=2, timeout=20)
    control = chat.transcript.get_by_role("group", name="Versions of this answer").filter(
        visible=True
    )
    expect(control).to_have_count(1)
    expect(control).to_contain_text("2/2")
    expect(chat.transcript.get_by_text("Version 3.1.0 is fine.")).to_be_hidden()
    screenshot(chat.page, "42-versions-newest-desktop")
    assert violations(chat.page) == []

    # On a phone, by the keyboard: the earlier version, then back to the newest.
    chat.page.set_viewport_size({"width": 390, "height": 844})
    chat.reload()
    control = chat.transcript.get_by_role("group", name="Versions of this answer").filter(
        visible=True
    )
    expect(control).to_contain_text("2/2")
    # One action row for the turn shown, at this width too.
    expect(chat.transcript.locator(".answer-actions").filter(visible=True)).to_have_count(1)
    expect(chat.transcript.locator(".usage").filter(visible=True)).to_have_count(1)
    screenshot(chat.page, "42-one-footer-phone")
    expect(control.get_by_role("button", name="Next version")).to_be_disabled()
    control.get_by_role("button", name="Previous version").focus()
    chat.page.keyboard.press("Enter")
    expect(chat.transcript.get_by_text("Version 3.1.0 is fine.")).to_be_visible()
    expect(chat.transcript.get_by_text("Yes: 3.1.0 is fine.")).to_be_hidden()
    shown = chat.transcript.get_by_role("group", name="Versions of this answer").filter(
        visible=True
    )
    expect(shown).to_have_count(1)
    expect(shown).to_contain_text("1/2")
    expect(shown.get_by_text("Version 1 of 2")).to_have_count(1)
    expect(shown.get_by_role("button", name="Next version")).to_be_focused()
    # The version says once that it was replaced, though it has several rows.
    expect(chat.transcript.locator(".replaced-note").filter(visible=True)).to_have_count(1)
    screenshot(chat.page, "42-versions-earlier-phone")
    assert violations(chat.page) == []
    chat.page.keyboard.press("Enter")
    expect(chat.transcript.get_by_text("Yes: 3.1.0 is fine.")).to_be_visible()
    expect(chat.transcript.get_by_text("Version 3.1.0 is fine.")).to_be_hidden()
    screenshot(chat.page, "42-versions-newest-phone")
    # The model was asked the question again without the replaced answer.
    last = model.requests[-1]["messages"]
    assert all("Version 3.1.0 is fine." not in str(m["content"]) for m in last)
    assert chat.errors == []
