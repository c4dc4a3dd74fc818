"""Daily use, round two (issue 42), in Chromium at 1280x800 and 390x844: an edit behaves like
the composer (Enter sends it, Shift+Enter adds a line) and closes when something else replaces
what it would have answered (Regenerate, a new message); no page asks for a missing icon; a
forgotten password can be reset from the login page, and its notice is a success's green."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.axe import violations
from tests.browser.pages import ChatPage, screenshot
from tests.support.fake_anthropic import Reply

pytestmark = pytest.mark.browser

VIEWPORTS = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}


def open_chat(tab, size: str, username: str = "alice") -> ChatPage:
    viewport = VIEWPORTS[size]
    return tab(username, width=viewport["width"], height=viewport["height"])


def watch_failures(page) -> list[str]:
    """The addresses the page asked for that answered 4xx or 5xx, as they come."""
    failed: list[str] = []
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    return failed


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
    failed = watch_failures(chat.page)
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
    assert violations(chat.page) == []
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
    assert failed == []  # no request of the page failed


@pytest.mark.parametrize("size", VIEWPORTS)
def test_a_forgotten_password_is_reset_from_the_login_page(browser, chat_server, size):
    context = browser.new_context(viewport=VIEWPORTS[size])
    try:
        page = context.new_page()
        failed = watch_failures(page)
        page.goto(f"{chat_server.url}/accounts/login/")
        page.get_by_role("link", name="Forgot your password?").click()
        expect(page.get_by_role("heading", name="Forgot your password?")).to_be_visible()
        assert violations(page) == []
        page.get_by_label("E-mail address").fill("nobody@example.org")
        page.get_by_role("button", name="Mail me a link").click()
        sent = page.locator("#password-reset-sent")
        expect(sent).to_contain_text("a link to choose a new password is on its way")
        background = sent.evaluate("(el) => getComputedStyle(el).backgroundColor")
        assert background in ("rgb(233, 247, 236)", "rgb(28, 51, 34)"), background
        screenshot(page, f"42-password-reset-sent-{size}")
        assert violations(page) == []
        icon = page.locator('link[rel="icon"]').get_attribute("href")
        assert page.request.get(f"{chat_server.url}{icon}").ok
        assert failed == []
    finally:
        context.close()


# -- the phone layout (point 4) ---------------------------------------------------------------------

OVERLAP = """([a, b]) => {
  const r = a.getBoundingClientRect(), s = b.getBoundingClientRect();
  return r.left < s.right && s.left < r.right && r.top < s.bottom && s.top < r.bottom;
}"""

# The lines the conversation's header takes: the distinct tops of what it shows.
HEADER_LINES = """() => {
  const head = document.querySelector('.chat-head');
  const items = [head.querySelector('h1'), ...head.querySelectorAll('.chat-tools > *')]
    .filter((el) => el.offsetParent !== null && el.getBoundingClientRect().height > 0);
  const tops = [];
  for (const el of items) {
    const top = Math.round(el.getBoundingClientRect().top);
    if (!tops.some((t) => Math.abs(t - top) < 8)) tops.push(top);
  }
  return tops.length;
}"""

FIRST_RUN = """
from django.contrib.auth.models import User
from skills_app.models import UserPreference
UserPreference.objects.filter(user=User.objects.get(username="rita")).update(intro_dismissed_at=None)
"""


@pytest.mark.parametrize("size", VIEWPORTS)
def test_the_slash_menu_the_first_run_card_and_the_header_fit_the_screen(
    tab, model, chat_server, size
):
    from tests.browser.server_data import run_in_server

    run_in_server(chat_server, FIRST_RUN)
    model.enqueue(Reply.text("An answer, so the header shows a cost."))
    chat = open_chat(tab, size, "rita")
    page = chat.page
    chat.new_conversation()
    problems = []  # each check says what it found; all of them are reported at the end

    # The first-run card, on a screen short enough to scroll: nothing to jump to yet, so no
    # "Jump to the newest" floats over the card's button.
    page.set_viewport_size({"width": VIEWPORTS[size]["width"], "height": 360})
    intro = page.get_by_role("region", name="Getting started with skills")
    expect(intro).to_be_visible()
    intro.get_by_role("button", name="Got it, hide this").scroll_into_view_if_needed()
    page.evaluate("window.scrollTo(0, 0)")
    page.evaluate("window.dispatchEvent(new Event('scroll'))")
    assert page.evaluate("document.documentElement.scrollHeight > innerHeight + 120")
    if page.locator("#jump-newest").is_visible():
        problems.append("Jump to the newest is shown over an empty conversation")
    screenshot(page, f"42-first-run-{size}")
    page.set_viewport_size(VIEWPORTS[size])

    # The "/" menu: a skill's "About" sits clear of its name, argument hint and description.
    composer = page.locator("#message-input")
    composer.fill("/text-stats")
    option = page.get_by_role("listbox", name="Skills").get_by_role("option").first
    expect(option.locator(".option-hint")).to_be_visible()
    about = option.locator(".option-about")
    expect(about).to_have_text("About")
    for part in (".option-name", ".option-hint", ".option-description"):
        if page.evaluate(OVERLAP, [about.element_handle(), option.locator(part).element_handle()]):
            problems.append(f"About overlaps {part}")
    screenshot(page, f"42-slash-about-{size}")
    composer.fill("")

    # The header: at most three lines on a phone (the title, then the tools), two on a desktop.
    chat.send("What does this cost?")
    expect(chat.transcript.locator(".row-assistant .md")).to_have_count(1)
    expect(page.locator("#conversation-cost")).to_contain_text("$")
    lines = page.evaluate(HEADER_LINES)
    if lines > (3 if size == "phone" else 2):
        problems.append(f"the header takes {lines} lines")
    # The figures stay for a screen reader on a phone.
    expect(page.locator("#conversation-cost")).to_contain_text(" in (")
    screenshot(page, f"42-header-{size}")
    assert problems == []
    assert chat.errors == []
