"""Keyboard shortcuts and the theme switch (issue 42, points 12 and 13), at 1280 and 390 px.

At 1280: Escape stops the answer being written, Alt+Shift+C copies the last answer, Ctrl+K puts
the cursor in the conversation search, "?" outside a field opens the shortcuts sheet (a modal
dialog that keeps focus and closes on Escape), Ctrl+Shift+O starts a new chat; the Settings menu
switches the theme at once and the page comes back in it. At 390 (no keyboard to speak of): the
theme switch and the sheet reached from the menu. axe finds nothing in light or in dark."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.browser.axe import violations
from tests.browser.live_server import USERS
from tests.browser.pages import ChatPage, login, screenshot
from tests.browser.server_data import run_in_server
from tests.support.fake_anthropic import Reply

pytestmark = pytest.mark.browser

EVENTS_BEFORE_TEXT = 3  # message_start, ping, content_block_start
LIGHT_BG = "rgb(247, 247, 245)"
DARK_BG = "rgb(20, 20, 23)"


def background(page: Page) -> str:
    return page.evaluate("getComputedStyle(document.body).backgroundColor")


def choose_theme(page: Page, label: str) -> None:
    """Pick a theme in the Settings menu and wait until the server has stored it."""
    menu = page.locator("details.settings-menu")
    if menu.get_attribute("open") is None:
        menu.locator("summary").click()
    with page.expect_response(re.compile(r"/me/theme/$")) as stored:
        menu.get_by_role("radio", name=label).check()
    assert stored.value.status == 204


def test_shortcuts_and_the_theme_at_1280_and_390(browser, chat_server, model):
    # A sign-in of its own (with the clipboard allowed); the theme is put back in `finally`, as
    # the other tests' tabs are alice too.
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    try:
        page = context.new_page()
        login(page, chat_server.url, "alice", USERS["alice"])
        chat = ChatPage(page, chat_server.url)
        found: dict[str, list[str]] = {}

        # -- 1280: the keyboard --------------------------------------------------------------
        release, reached = model.pause()
        model.enqueue(
            Reply.text("The answer worth keeping, copied by a key."),
            Reply.text(
                "A long answer that Escape cuts short before this tail.",
                chunk=8,
                wait_for=release,
                wait_after_events=EVENTS_BEFORE_TEXT + 3,
                reached=reached,
            ),
        )
        first = chat.new_conversation()
        chat.send("Say something to copy")
        expect(chat.transcript.get_by_role("button", name="Copy answer")).to_have_count(1)
        page.keyboard.press("Alt+Shift+C")
        expect(page.locator("#copy-status")).to_have_text("Answer copied to the clipboard.")
        assert page.evaluate("navigator.clipboard.readText()") == (
            "The answer worth keeping, copied by a key."
        )

        chat.send("Now a long one")
        assert reached.wait(10), "the model was never asked"
        stop = page.get_by_role("button", name="Stop")
        expect(stop).to_be_visible()
        # From the message box, where a person is when they want it to stop.
        chat.message_box.click()
        page.keyboard.press("Escape")
        chat.wait_run_finished(count=2)
        finished = [f for f in chat.parsed_frames() if f.get("type") == "run.finished"]
        assert finished[-1]["data"]["status"] == "stopped"
        expect(stop).to_be_hidden()

        # Ctrl+K from a page without the list goes to the list with its search focused.
        page.goto(f"{chat_server.url}/skills/")
        page.keyboard.press("ControlOrMeta+K")
        search = page.get_by_role("searchbox", name="Search conversations")
        expect(search).to_be_focused()
        chat.open(first)
        page.keyboard.press("ControlOrMeta+K")
        expect(search).to_be_focused()
        # In a field "?" is a character, not the sheet.
        page.keyboard.type("?")
        expect(search).to_have_value("?")
        sheet = page.get_by_role("dialog", name="Keyboard shortcuts")
        expect(sheet).to_be_hidden()
        search.fill("")
        page.locator("h1").first.click()
        page.keyboard.press("?")
        expect(sheet).to_be_visible()
        expect(sheet).to_contain_text("Ctrl + Shift + O")
        # Focus stays in the sheet (the page behind is inert), and Escape closes it.
        for _ in range(4):
            page.keyboard.press("Tab")
            assert page.evaluate("document.activeElement.closest('dialog') !== null")
        found["sheet-light-1280"] = violations(page)
        screenshot(page, "42-shortcuts-sheet-1280")
        page.keyboard.press("Escape")
        expect(sheet).to_be_hidden()
        # Escape closing the sheet stopped nothing and started nothing.
        assert chat.conversation_id == first

        # A new chat from any page (here the Skills page, which has no New button of its own).
        page.goto(f"{chat_server.url}/skills/")
        page.keyboard.press("ControlOrMeta+Shift+O")
        page.wait_for_url(lambda url: re.search(r"/c/(\d+)/$", url) and f"/c/{first}/" not in url)

        # -- 1280: the theme -------------------------------------------------------------------
        assert page.locator("html").get_attribute("data-theme") == "system"
        assert background(page) == LIGHT_BG
        choose_theme(page, "Dark")
        # At once, before any reload.
        expect(page.locator("html")).to_have_attribute("data-theme", "dark")
        assert background(page) == DARK_BG
        found["menu-dark-1280"] = violations(page)
        screenshot(page, "42-theme-menu-dark-1280")
        page.reload()
        expect(page.locator("html")).to_have_attribute("data-theme", "dark")
        assert background(page) == DARK_BG
        # Light wins over a dark system.
        page.emulate_media(color_scheme="dark")
        choose_theme(page, "Light")
        assert background(page) == LIGHT_BG

        # -- 390: the theme and the sheet from the menu ---------------------------------------
        page.set_viewport_size({"width": 390, "height": 844})
        page.reload()
        assert background(page) == LIGHT_BG
        choose_theme(page, "System")
        assert background(page) == DARK_BG  # the system is dark here
        page.locator("details.settings-menu").get_by_role(
            "button", name="Keyboard shortcuts"
        ).click()
        expect(sheet).to_be_visible()
        box = sheet.bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= 390
        found["sheet-dark-390"] = violations(page)
        screenshot(page, "42-shortcuts-sheet-dark-390", full_page=False)
        sheet.get_by_role("button", name="Close").click()
        expect(sheet).to_be_hidden()
        page.emulate_media(color_scheme="light")
        page.locator("details.settings-menu > summary").click()
        found["menu-light-390"] = violations(page)
        screenshot(page, "42-theme-menu-light-390", full_page=False)
        assert page.evaluate("document.documentElement.scrollWidth") <= 390

        dirty = {name: lines for name, lines in found.items() if lines}
        assert dirty == {}, "axe found:\n" + "\n".join(
            f"[{name}] {line}" for name, lines in dirty.items() for line in lines
        )
        assert chat.errors == []
    finally:
        context.close()
        run_in_server(
            chat_server,
            "from skills_app.models import UserPreference\n"
            "UserPreference.objects.filter(user__username='alice').update(theme='system')\n",
        )
