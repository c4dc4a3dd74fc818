"""axe-core finds nothing on any page, in any state, at 1440x900 and 390x844 (issue 29): the chat
empty and with the introduction, the "/" menu open, each header menu open, an edited conversation,
an approval pending with a queued message, copied, the phone drawer open; every page each role
reaches from the menu and below it, which must also fit a phone's width; the chat and every page
again in the dark colour scheme."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.axe import violations
from tests.browser.pages import ChatPage, screenshot
from tests.browser.server_data import run_in_server
from tests.browser.test_chat_daily import EXTRA_PAGES, WIDEST, _pages_of
from tests.support.fake_anthropic import Reply

pytestmark = pytest.mark.browser

VIEWPORTS = {"desktop": {"width": 1440, "height": 900}, "phone": {"width": 390, "height": 844}}


class States:
    """Runs axe over each state and keeps what it found, so one test reports every state."""

    def __init__(self, chat: ChatPage, size: str) -> None:
        self.chat = chat
        self.size = size
        self.found: dict[str, list[str]] = {}

    def check(self, name: str) -> None:
        self.found[name] = violations(self.chat.page)
        screenshot(self.chat.page, f"29-axe-{name}-{self.size}")

    def assert_clean(self) -> None:
        dirty = {name: lines for name, lines in self.found.items() if lines}
        assert dirty == {}, "axe found:\n" + "\n".join(
            f"[{name}] {line}" for name, lines in dirty.items() for line in lines
        )


@pytest.mark.parametrize("size", VIEWPORTS)
def test_the_chat_is_clean_in_every_state(tab, model, chat_server, size):
    model.enqueue(
        Reply.text("An answer with `code`, **bold** and\n\n```python\nprint('hi')\n```"),
        Reply.text("The answer to the fixed question, with a [link](https://example.org)."),
        Reply.tool_use(
            "Skill", {"skill": "browser-ask", "args": "draft.md"}, id=f"toolu_ax_{size}"
        ),
        Reply.text("Stopped answer not used."),
    )
    # The first screen with its introduction, whatever earlier tests closed.
    run_in_server(
        chat_server,
        "from skills_app.models import UserPreference\n"
        "UserPreference.objects.filter(user__username='alice').update(intro_dismissed_at=None)\n",
    )
    viewport = VIEWPORTS[size]
    chat = tab("alice", width=viewport["width"], height=viewport["height"])
    chat.page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    states = States(chat, size)
    chat.page.goto(f"{chat.base_url}/c/start/")
    chat.wait_until(lambda: chat.resumed_count() > 0, "the socket")
    expect(chat.page.locator("#intro")).to_be_visible()
    states.check("first-screen")
    chat.message_box.fill("/")
    expect(chat.page.get_by_role("listbox", name="Skills")).to_be_visible()
    states.check("slash-menu")
    chat.message_box.fill("")

    chat.send("Whta is a skill?")
    expect(chat.transcript.locator(".row-assistant .md")).to_have_count(1)
    chat.transcript.get_by_role("button", name="Edit", exact=True).click()
    chat.transcript.get_by_role("textbox", name="Edited message").fill("What is a skill?")
    states.check("edit-form")
    chat.transcript.get_by_role("button", name="Send edited message").click()
    expect(chat.transcript.locator(".row.replaced")).to_have_count(2)
    chat.transcript.get_by_role("button", name="Copy answer").last.click()
    expect(chat.page.locator("#copy-status")).to_have_text("Answer copied to the clipboard.")
    states.check("edited-and-copied")
    for menu in ("rename", "model-picker", "export-menu"):
        chat.page.locator(f".chat-tools details.{menu} > summary").click()
        expect(chat.page.locator(f".chat-tools details.{menu}")).to_have_attribute("open", "")
        states.check(f"menu-{menu}")
    chat.page.keyboard.press("Escape")

    chat.send("Check my draft")
    expect(chat.approval().get_by_role("button", name="Allow once")).to_be_visible()
    chat.send("Then summarise it")
    expect(chat.transcript.locator(".row-queued")).to_have_count(1)
    states.check("approval-pending")
    chat.page.evaluate("window.scrollTo(0, 0)")
    expect(chat.page.get_by_role("button", name="Jump to the newest")).to_be_visible()
    states.check("scrolled-up")
    chat.page.get_by_role("button", name="Stop").click()
    expect(chat.chip("browser-ask")).to_have_attribute("data-state", "stopped")
    states.check("stopped")

    if size == "phone":
        chat.page.locator(".chat-head .sidebar-toggle").click()
        expect(chat.page.get_by_role("complementary", name="Conversations")).to_be_visible()
        states.check("drawer-open")
    states.assert_clean()
    assert chat.errors == []


# What every page is checked with, per role: a conversation whose answer has code, a link and a
# long unbroken path (the widest thing a phone must wrap) after a message with a long word.
ROLE_REPLY = (
    "An answer with `code`, **bold**, a [link](https://example.org), the path "
    "/var/lib/skillscope/" + "a" * 120 + " and\n\n```python\nprint('hi')\n```"
)
# The roles whose pages are checked in the dark colour scheme too (the system's setting, which
# the app follows): a chatter's pages and an auditor's, which between them hold every style.
DARK = ("alice", "audrey")


@pytest.mark.parametrize("username", ["alice", "mona", "audrey"])
def test_every_page_of_each_role_is_clean_at_both_widths_and_fits_a_phone(tab, model, username):
    """Each page is loaded once and checked at 1440 px, then at 390 px (resized, as a turned or
    narrowed window is: the layout is recomputed, and nothing may scroll sideways there), and
    for DARK's roles in the dark scheme at 1440 px."""
    model.enqueue(Reply.text(ROLE_REPLY))
    desktop, phone = VIEWPORTS["desktop"], VIEWPORTS["phone"]
    chat = tab(username, width=desktop["width"], height=desktop["height"])
    conversation = chat.new_conversation()
    chat.send("A message with a long unbroken word " + "b" * 150)
    expect(chat.transcript.locator(".row-assistant .md")).to_have_count(1)
    base = chat.base_url
    pages = [f"{base}/c/{conversation}/", *_pages_of(chat.page, base)]
    pages += [f"{base}{path}" for path in EXTRA_PAGES[username]]
    pages.append(f"{base}/c/{conversation}/delete/")
    pages.append(f"{base}/c/{conversation}/summarise/")
    if username == "audrey":
        pages.append(f"{base}/audit/conversations/{conversation}/")
    found: dict[str, list[str]] = {}
    wide: dict[str, tuple[int, list[str]]] = {}

    def check(label: str) -> None:
        lines = violations(chat.page)
        if lines:
            found[label] = lines

    for url in pages:
        path = url.removeprefix(base)
        chat.page.set_viewport_size(desktop)
        chat.page.goto(url)
        check(f"{path} at 1440 px")
        if username in DARK:
            chat.page.emulate_media(color_scheme="dark")
            assert chat.page.evaluate("matchMedia('(prefers-color-scheme: dark)').matches")
            check(f"{path} at 1440 px, dark")
            if url == pages[0]:
                screenshot(chat.page, f"29-axe-dark-chat-{username}")
            chat.page.emulate_media(color_scheme="light")
        chat.page.set_viewport_size(phone)
        check(f"{path} at 390 px")
        width = chat.page.evaluate("document.documentElement.scrollWidth")
        if width > phone["width"]:
            wide[path] = (width, chat.page.evaluate(WIDEST))
    assert found == {}, "axe found:\n" + "\n".join(
        f"[{label}] {line}" for label, lines in found.items() for line in lines
    )
    assert wide == {}, f"pages wider than 390 px for {username}: {wide}"


def test_the_checker_finds_what_is_wrong_on_a_page_and_after_it_changes(browser):
    """The harness itself: axe loaded once per document still sees each later state."""
    page = browser.new_page()
    try:
        page.set_content(
            "<html lang='en'><head><title>Fine</title></head>"
            "<body><main><h1>Fine</h1></main></body></html>"
        )
        assert violations(page) == []
        page.evaluate("document.querySelector('main').innerHTML += '<img src=\"x.png\">'")
        found = violations(page)
        assert any(line.startswith("image-alt (critical)") for line in found), found
    finally:
        page.close()
