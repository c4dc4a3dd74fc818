"""Issue 42, point 14, in Chromium: alice shares a conversation that loaded a skill, copies the
link; mona (no inspect permission) opens it at 1280x800 and 390x844 and sees the chip and the
answer, never the skill's hidden text, with no composer; axe finds nothing; alice revokes the
link and mona's reload shows nothing of the conversation."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.axe import violations
from tests.browser.conftest import BASE_DIR_LINE, SLASH_MARKER
from tests.browser.pages import screenshot
from tests.support.fake_anthropic import Reply

pytestmark = pytest.mark.browser

ANSWER = "Status: the roadmap review moved to Friday."


def test_a_shared_link_shows_the_viewer_no_hidden_text_and_nothing_once_revoked(tab, model):
    model.enqueue(Reply.text(ANSWER))
    chat = tab("alice", width=1280, height=800)
    # A browser with a window lets a page a person clicked in write the clipboard; the headless
    # shell has no window to ask in, so the permission is given as that default would.
    chat.page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    chat.new_conversation()
    chat.send("/browser-slash roadmap review")
    chat.wait_run_finished(1)
    expect(chat.chip("browser-slash")).to_have_attribute("data-state", "loaded")

    chat.page.get_by_role("link", name="Share", exact=True).click()
    chat.page.get_by_label("Works for").select_option("1")
    chat.page.get_by_role("button", name="Make a link").click()
    field = chat.page.get_by_label("Your new link (shown only now: copy it)")
    link = field.input_value()
    assert "/s/" in link
    chat.page.get_by_role("button", name="Copy link").click()
    expect(chat.page.get_by_role("button", name="Copied")).to_be_visible()
    assert chat.page.evaluate("navigator.clipboard.readText()") == link
    screenshot(chat.page, "share-01-owner-made-a-link")

    viewer = tab("mona", width=1280, height=800).page
    viewer.goto(link)
    transcript = viewer.get_by_role("region", name="Transcript")
    expect(transcript.locator('.chip[data-skill="browser-slash"]')).to_be_visible()
    expect(transcript.locator(".row-assistant .md")).to_have_text(ANSWER)
    expect(viewer.get_by_role("textbox")).to_have_count(0)
    expect(viewer.get_by_role("button", name="Regenerate")).to_have_count(0)
    for width, height, name in (
        (1280, 800, "share-02-viewer-1280"),
        (390, 844, "share-03-viewer-390"),
    ):
        viewer.set_viewport_size({"width": width, "height": height})
        html = viewer.content()
        assert SLASH_MARKER not in html and BASE_DIR_LINE not in html
        # Nothing runs past the screen's edge on a phone.
        assert viewer.evaluate("document.documentElement.scrollWidth") <= width
        assert violations(viewer) == []
        screenshot(viewer, name)

    chat.page.get_by_role("button", name="Revoke").click()
    expect(chat.page.get_by_text("revoked")).to_be_visible()
    answer = viewer.goto(link)
    assert answer is not None and answer.status == 404
    expect(viewer.get_by_role("heading", name="This link shows nothing")).to_be_visible()
    assert ANSWER not in viewer.content()
    assert violations(viewer) == []
    screenshot(viewer, "share-04-revoked")
