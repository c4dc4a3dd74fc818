"""A chat people reach for every day (issue 29), in Chromium at 1440x900 and 390x844: a clean stop,
the composer that says when the answer waits for the person, copy buttons, Markdown while it
streams, the first screen, titles and times, editing an earlier message, jump to the newest."""

from __future__ import annotations

import math
import re
from datetime import datetime

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import PROBE_MARKER
from tests.browser.pages import ChatPage, doc_screenshot, screenshot
from tests.support.fake_anthropic import Reply

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
    doc_screenshot(chat.page, f"stopped-{size}")

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


# -- copy buttons --------------------------------------------------------------------------------

ANSWER_WITH_CODE = (
    "Here is the script:\n\n```python\nprint('hello')\n```\n\nRun it with **python**."
)


def clipboard(chat: ChatPage) -> str:
    return chat.page.evaluate("navigator.clipboard.readText()")


@pytest.mark.parametrize("size", VIEWPORTS)
def test_copy_buttons_copy_what_the_viewer_sees_and_say_so(tab, model, size):
    model.enqueue(
        Reply.tool_use("Skill", {"skill": "browser-probe", "args": "2.5.0"}),
        Reply.tool_use("Read", {"file_path": "skills/browser-probe/SKILL.md"}),
        Reply.text(ANSWER_WITH_CODE),
    )
    chat = open_chat(tab, size)
    chat.page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    chat.new_conversation()
    chat.send("Show me a script")
    chat.wait_run_finished(timeout=20)
    answer = chat.transcript.locator(".row-assistant").filter(has_text="Here is the script")
    status = chat.page.locator("#copy-status")

    # The answer: by the keyboard (Tab reaches the button, Enter presses it).
    copy_answer = answer.get_by_role("button", name="Copy answer")
    copy_answer.focus()
    chat.page.keyboard.press("Enter")
    expect(status).to_have_text("Answer copied to the clipboard.")
    copied = clipboard(chat)
    assert "Here is the script:" in copied and "print('hello')" in copied and "**" not in copied

    answer.get_by_role("button", name="Copy code").click()
    expect(status).to_have_text("Code copied to the clipboard.")
    assert clipboard(chat) == "print('hello')"

    # Tool output: what the card shows, the hidden file's text withheld as on the page.
    card = chat.transcript.locator('.tool[data-tool="Read"]')
    card.locator(".tool-result summary").click()
    card.get_by_role("button", name="Copy output").click()
    expect(status).to_have_text("Output copied to the clipboard.")
    output = clipboard(chat)
    assert "[hidden skill file browser-probe/SKILL.md withheld:" in output
    assert PROBE_MARKER not in output
    doc_screenshot(chat.page, f"copy-{size}")
    assert chat.errors == []


# -- Markdown while it streams, and nothing it says becomes markup ----------------------------------

HOSTILE = (
    "Formatting **works** while it streams.\n\n"
    "- a list item\n  1. nested and `inline code`\n\n"
    "| Left | Right |\n|:-----|------:|\n| one | 1 |\n\n"
    "```python\nprint('a fenced block')\n```\n\n"
    "<script>window.__pwned = 'script'</script>\n\n"
    "<img src=x onerror=\"window.__pwned = 'img'\">\n\n"
    "[a link](javascript:window.__pwned='link') and [tabbed](java\tscript:window.__pwned='tab') "
    "and [data](data:text/html,<script>alert(1)</script>) and [fine](https://example.org/a).\n\n"
    "![picture](https://example.org/p.png)\n\n"
    "THE-END"
)

NO_MARKUP = """() => {
  const area = document.querySelector('#live') ;
  const links = [...document.querySelectorAll('#live a, #transcript .md a')].map((a) => a.getAttribute('href'));
  return {
    pwned: window.__pwned || null,
    scripts: document.querySelectorAll('#live script, #transcript script').length,
    images: document.querySelectorAll('#live img, #transcript img').length,
    handlers: [...document.querySelectorAll('#live *, #transcript .md *')].filter((el) => [...el.attributes].some((a) => a.name.startsWith('on'))).length,
    links,
    strong: area ? area.querySelectorAll('strong').length : 0,
  };
}"""


@pytest.mark.parametrize("size", VIEWPORTS)
def test_streamed_markdown_is_rendered_and_never_becomes_markup(tab, model, size):
    release, reached = model.pause()
    model.enqueue(
        Reply.text(
            HOSTILE,
            chunk=9,
            wait_for=release,
            # Paused once the links' line is out and before the picture's link can be whole.
            wait_after_events=3 + math.ceil(HOSTILE.index("![picture") / 9),
            reached=reached,
        )
    )
    chat = open_chat(tab, size)
    chat.new_conversation()
    chat.send("Say something hostile")
    assert reached.wait(10), "the model was never asked"
    expect(chat.live_text.locator("strong")).to_have_text("works")
    expect(chat.live_text.locator("ul > li > ol > li code")).to_have_text("inline code")
    expect(chat.live_text.locator("table td")).to_have_text(["one", "1"])
    expect(chat.live_text.locator("td").last).to_have_attribute("style", "text-align:right")
    expect(chat.live_text.locator("pre code.language-python")).to_have_text(
        "print('a fenced block')\n"
    )
    expect(chat.live_text).to_contain_text("<script>window.__pwned = 'script'</script>")
    expect(chat.live_text.get_by_role("link", name="fine")).to_have_attribute(
        "href", "https://example.org/a"
    )
    seen = chat.page.evaluate(NO_MARKUP)
    assert seen["pwned"] is None and seen["scripts"] == 0 and seen["images"] == 0
    assert seen["handlers"] == 0
    # Only the safe link: the javascript:, tabbed and data: ones stay text (the picture's line
    # has not arrived yet).
    assert seen["links"] == ["https://example.org/a"]
    # A refused link stays the text it was written as, as in the server's render.
    expect(chat.live_text).to_contain_text("[a link](javascript:window.__pwned='link') and")
    doc_screenshot(chat.page, f"streamed-markdown-{size}")

    release.set()
    expect(chat.transcript.locator(".row-assistant .md")).to_contain_text("THE-END")
    seen = chat.page.evaluate(NO_MARKUP)
    assert seen["pwned"] is None and seen["scripts"] == 0 and seen["images"] == 0
    # The stored answer (the server's render) allows the same links as the streamed one did.
    assert seen["links"] == ["https://example.org/a", "https://example.org/p.png"]
    # and adds the one thing the preview leaves out: the code block's highlighting.
    stored = chat.transcript.locator(".row-assistant .md")
    expect(stored.locator("pre code.language-python span").first).to_be_attached()
    assert chat.errors == []


# -- keyboard ---------------------------------------------------------------------------------------


def focused(chat: ChatPage) -> str:
    """What has focus: its id, or its tag and accessible text."""
    return chat.page.evaluate(
        """() => { const el = document.activeElement;
        return el.id || (el.tagName.toLowerCase() + ':' + (el.getAttribute('aria-label') || el.textContent.trim())); }"""
    )


@pytest.mark.parametrize("size", VIEWPORTS)
def test_the_keyboard_reaches_everything_in_a_sensible_order(tab, model, size):
    chat = open_chat(tab, size)
    page = chat.page
    # Playwright turns on Chromium's file-chooser interception without waiting for it when the
    # first listener is added, so a key pressed at once can open the picker before it is on
    # (puppeteer#6040 describes the race): the listener is added long before the key.
    page.on("filechooser", lambda _chooser: None)
    chat.new_conversation()
    # The introduction (shown until its reader closes it, whatever earlier tests did) is closed
    # first: this walk is the everyday screen's.
    intro = page.get_by_role("region", name="Getting started with skills")
    if intro.count():
        intro.get_by_role("button", name="Got it, hide this").click()
        expect(intro).to_have_count(0)
    # The first Tab offers the way to the message box.
    page.keyboard.press("Tab")
    assert focused(chat) == "a:Skip to the message box"
    page.keyboard.press("Enter")
    assert focused(chat) == "message-input"
    # From the message box: "+ Attach files" (a real button), then Send.
    page.keyboard.press("Tab")
    assert focused(chat) == "attach-button"
    with page.expect_file_chooser() as chooser:
        page.keyboard.press("Space")
    assert chooser.value.is_multiple()
    page.keyboard.press("Tab")
    assert focused(chat) == "send-button"

    # The "/" menu: announced, its list reachable (Shift+Tab) and operable by keys.
    chat.message_box.focus()
    page.keyboard.type("/")
    menu = page.get_by_role("listbox", name="Skills")
    expect(menu).to_be_visible()
    expect(page.locator("#slash-status")).to_contain_text("match. Up and down arrows choose")
    page.keyboard.press("Shift+Tab")
    assert focused(chat) == "slash-menu"
    expect(menu).to_be_visible()
    options = menu.get_by_role("option").locator(".option-name").all_inner_texts()
    page.keyboard.press("End")
    page.keyboard.press("Enter")
    expect(chat.message_box).to_have_value(f"{options[-1]} ")
    assert focused(chat) == "message-input"
    chat.message_box.fill("")

    # One header menu at a time; focus goes in, Escape closes and returns focus.
    rename = page.locator(".chat-tools details.rename")
    model_menu = page.locator(".chat-tools details.model-picker")
    rename.locator("summary").focus()
    page.keyboard.press("Enter")
    expect(rename).to_have_attribute("open", "")
    expect(rename.get_by_role("textbox", name="New title")).to_be_focused()
    model_menu.locator("summary").click()
    expect(model_menu).to_have_attribute("open", "")
    expect(rename).not_to_have_attribute("open", "")
    page.keyboard.press("Escape")
    expect(model_menu).not_to_have_attribute("open", "")
    expect(model_menu.locator("summary")).to_be_focused()
    assert chat.errors == []


def test_a_quick_tab_away_and_back_keeps_the_new_slash_menu(tab, model):
    # Leaving the message box closes its "/" menu a moment later (so a click in the list still
    # lands); that delayed close must not hit a menu opened after focus came back.
    chat = open_chat(tab, "desktop")
    chat.new_conversation()
    page = chat.page
    # The page's clock stands still from before the blur, so the blur's delayed close is still
    # pending when "/" opens the new menu, however slow the machine; then it is let run.
    page.clock.install(time=datetime(2026, 1, 5, 9, 0, 0))
    page.clock.pause_at(datetime(2026, 1, 5, 9, 0, 1))
    chat.message_box.focus()
    page.keyboard.press("Tab")
    chat.message_box.focus()
    page.keyboard.type("/")
    page.clock.run_for(1000)
    expect(page.get_by_role("listbox", name="Skills")).to_be_visible()
    expect(page.locator("#slash-status")).to_contain_text("match. Up and down arrows choose")


def test_the_phone_drawer_keeps_focus_inside_and_escape_closes_it(tab, model):
    chat = open_chat(tab, "phone")
    chat.new_conversation()
    page = chat.page
    toggle = page.locator(".chat-head .sidebar-toggle")
    toggle.focus()
    page.keyboard.press("Enter")
    drawer = page.get_by_role("complementary", name="Conversations")
    expect(drawer).to_be_visible()
    expect(drawer.get_by_role("searchbox", name="Search conversations")).to_be_focused()
    expect(page.locator("#chat")).to_have_attribute("inert", "")
    for _ in range(8):  # Tab never leaves the drawer while it is open
        page.keyboard.press("Tab")
        assert page.evaluate("document.getElementById('sidebar').contains(document.activeElement)")
    screenshot(page, "29-drawer-phone")
    page.keyboard.press("Escape")
    expect(drawer).to_be_hidden()
    expect(toggle).to_be_focused()
    expect(page.locator("#chat")).not_to_have_attribute("inert", "")


# -- the answer waits for the person ----------------------------------------------------------------


@pytest.mark.parametrize("size", VIEWPORTS)
def test_the_composer_says_when_the_answer_waits_and_links_the_question(tab, model, size):
    model.enqueue(
        Reply.text("Long preamble.\n\n" + "\n\n".join(f"Point {i}." for i in range(40))),
        Reply.tool_use("Bash", {"command": "echo waiting"}, id=f"toolu_wait_{size}"),
        Reply.text("Done after the approval."),
        Reply.text("And the queued one answered."),
    )
    chat = open_chat(tab, size)
    chat.new_conversation()
    chat.send("Write a long list")
    expect(chat.transcript.locator(".row-assistant .md")).to_contain_text("Point 39.")
    chat.send("Now run the command")
    approval = chat.approval()
    expect(approval.get_by_role("button", name="Allow once")).to_be_visible()
    note = chat.page.locator("#waiting-note")
    expect(note).to_be_visible()
    expect(note).to_contain_text("The answer is waiting for you")
    chat.send("And after that, summarise")
    queued = chat.transcript.locator(".row-queued")
    # What it waits for, in words (the general line is not shown, to a reader or a screen reader).
    expect(queued.locator(".queued-why-approval")).to_be_visible()
    expect(queued.locator(".queued-why-end")).to_be_hidden()
    assert queued.locator(".queued-why").inner_text() == (
        "sent when the answer ends; it is waiting for your approval above"
    )
    # Scroll away from the question; the link brings it back with focus on its first button.
    chat.page.evaluate("window.scrollTo(0, 0)")
    note.get_by_role("link", name="Go to the approval request").click()
    expect(approval.get_by_role("button", name="Allow once")).to_be_focused()
    expect(approval).to_be_in_viewport()
    doc_screenshot(chat.page, f"waiting-for-you-{size}")
    chat.page.keyboard.press("Enter")  # Allow once, from the keyboard
    expect(note).to_be_hidden()
    # Focus does not fall to the top of the page when the card's buttons go.
    expect(chat.message_box).to_be_focused()
    expect(chat.transcript.locator(".row-assistant .md").last).to_have_text(
        "And the queued one answered."
    )
    assert chat.errors == []


@pytest.mark.parametrize("size", VIEWPORTS)
def test_jump_to_the_newest_shows_when_the_end_is_out_of_view(tab, model, size):
    model.enqueue(Reply.text("\n\n".join(f"Paragraph {i} of a long answer." for i in range(60))))
    chat = open_chat(tab, size)
    chat.new_conversation()
    chat.send("Write at length")
    expect(chat.transcript.locator(".row-assistant .md")).to_contain_text("Paragraph 59")
    jump = chat.page.get_by_role("button", name="Jump to the newest")
    expect(jump).to_be_hidden()
    chat.page.evaluate("window.scrollTo(0, 0)")
    expect(jump).to_be_visible()
    screenshot(
        chat.page,
        f"29-jump-{size}",
    )
    jump.click()
    expect(jump).to_be_hidden()
    assert chat.page.evaluate(
        "window.innerHeight + window.scrollY >= document.body.scrollHeight - 120"
    )
    expect(chat.message_box).to_be_focused()


# -- the first screen ---------------------------------------------------------------------------------


@pytest.mark.parametrize("size", VIEWPORTS)
def test_signing_in_lands_on_a_conversation_that_explains_skills(browser, chat_server, model, size):
    from tests.browser.live_server import USERS
    from tests.browser.server_data import run_in_server

    # Each width starts as a person who has not closed the introduction yet.
    run_in_server(
        chat_server,
        "from skills_app.models import UserPreference\n"
        "UserPreference.objects.filter(user__username='alice').update(intro_dismissed_at=None)\n",
    )
    context = browser.new_context(viewport=VIEWPORTS[size])
    try:
        page = context.new_page()
        page.goto(f"{chat_server.url}/accounts/login/")
        page.get_by_label("Username").fill("alice")
        page.get_by_label("Password").fill(USERS["alice"])
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(re.compile(r"/c/\d+/$"))
        first = page.url
        intro = page.get_by_role("region", name="Getting started with skills")
        expect(intro).to_be_visible()
        expect(intro).to_contain_text("type / in the message box")
        expect(intro.get_by_role("link", name="See all skills")).to_have_attribute(
            "href", "/skills/"
        )
        expect(page.get_by_role("textbox", name="Message")).to_be_visible()
        # No developer settings for an ordinary user: no delivery profile, no server settings.
        expect(page.locator("body")).not_to_contain_text("Skills delivered as")
        expect(page.locator("body")).not_to_contain_text("ANTHROPIC_API_KEY")
        doc_screenshot(page, f"first-screen-{size}")
        # New, again and again, stays on the one unused conversation.
        if size == "phone":
            page.locator(".chat-head .sidebar-toggle").click()
        page.get_by_role("button", name="New", exact=True).click()
        page.wait_for_load_state()
        assert page.url == first
        intro.get_by_role("button", name="Got it, hide this").click()
        page.wait_for_url(first)
        expect(page.get_by_role("region", name="Getting started with skills")).to_have_count(0)
        page.goto(f"{chat_server.url}/")
        expect(page.locator("body")).not_to_contain_text("Skills delivered as")
    finally:
        context.close()


# -- editing an earlier message, titles in words, times in the person's zone ------------------------


@pytest.mark.parametrize("size", VIEWPORTS)
def test_an_earlier_message_is_edited_and_later_turns_become_a_replaced_branch(tab, model, size):
    model.enqueue(
        Reply.text("Answer one."),
        Reply.text("Answer two."),
        Reply.text("Answer to the better first question."),
    )
    chat = open_chat(tab, size)
    chat.new_conversation()
    chat.send("First questoin")
    expect(chat.transcript.locator(".row-assistant .md")).to_have_count(1)
    chat.send("Second question")
    expect(chat.transcript.locator(".row-assistant .md")).to_have_count(2)
    first = chat.transcript.locator(".row-user").filter(has_text="First questoin")
    first.get_by_role("button", name="Edit", exact=True).click()
    box = first.get_by_role("textbox", name="Edited message")
    expect(box).to_be_focused()
    expect(box).to_have_value("First questoin")
    box.fill("First question, better")
    first.get_by_role("button", name="Send edited message").click()
    expect(chat.transcript.locator(".row-assistant:not(.replaced) .md")).to_have_text(
        ["Answer to the better first question."]
    )
    expect(chat.transcript.locator(".row.replaced")).to_have_count(4)
    doc_screenshot(chat.page, f"edit-earlier-{size}")
    sent = str(model.requests[-1]["messages"])
    assert "First question, better" in sent
    assert "Second question" not in sent and "Answer one." not in sent
    chat.reload()
    expect(chat.transcript.locator(".row.replaced")).to_have_count(4)
    # Escape closes an edit and gives focus back to its button.
    kept = chat.transcript.locator(".row-user:not(.replaced)")
    kept.get_by_role("button", name="Edit", exact=True).click()
    chat.page.keyboard.press("Escape")
    expect(kept.get_by_role("textbox", name="Edited message")).to_have_count(0)
    expect(kept.get_by_role("button", name="Edit", exact=True)).to_be_focused()


def test_a_slash_command_is_titled_in_words_and_times_follow_the_persons_zone(
    browser, chat_server, auth_states, model
):
    model.enqueue(
        Reply.text("Status: all green."), Reply.text("A second answer."), Reply.text("A third.")
    )
    context = browser.new_context(
        storage_state=auth_states["alice"], timezone_id="Asia/Tokyo", viewport=VIEWPORTS["desktop"]
    )
    try:
        chat = ChatPage(context.new_page(), chat_server.url)
        chat.new_conversation()
        chat.send("/browser-slash in/notes/weekly-sync.md")
        expect(chat.page.locator("#conversation-title")).to_have_text(
            "Browser slash: weekly-sync.md"
        )
        expect(chat.page.get_by_role("navigation", name="Your conversations")).to_contain_text(
            "Browser slash: weekly-sync.md"
        )
        # The browser's zone is stored; a live fragment and the reloaded page say the same time.
        expect(chat.page.locator("body")).to_have_attribute("data-time-zone", "Asia/Tokyo")
        chat.page.get_by_role("button", name="Regenerate").click()
        note = chat.transcript.locator(".replaced-note time").first
        expect(note).to_have_attribute("title", "Asia/Tokyo")
        live_text = note.inner_text()
        iso = note.get_attribute("datetime")
        chat.reload()
        reloaded = chat.transcript.locator(".replaced-note time").first
        assert reloaded.inner_text() == live_text
        offset = chat.page.evaluate(
            "(iso) => new Date(iso).toLocaleTimeString('en-GB', {timeZone: 'Asia/Tokyo', hour: '2-digit', minute: '2-digit', hourCycle: 'h23'})",
            iso,
        )
        assert live_text == offset
        doc_screenshot(chat.page, "slash-command-titled-desktop")
    finally:
        context.close()


# -- refusals in words; comparison runs apart ----------------------------------------------------------

DENY_RULE = """
from skills_app.models import PermissionRule
PermissionRule.objects.get_or_create(
    behavior="deny", rule_text="Bash(rm *)",
    defaults={"note": "Deleting files is done by the IT desk."},
)
"""

SEED_COMPARISON = """
from django.contrib.auth.models import User
from skills_app.models import Comparison, Conversation, Run, SkillInvocation
audrey = User.objects.get(username="audrey")
if not Comparison.objects.filter(created_by=audrey, prompt="seeded").exists():
    comparison = Comparison.objects.create(created_by=audrey, prompt="seeded", skills=[])
    compared = Conversation.objects.create(owner=audrey, title=f"Compare #{comparison.pk} · seeded",
                                           last_event_seq=2)
    comparison.conversations.add(compared)
    run = Run.objects.create(conversation=compared, status=Run.DONE)
    for _ in range(3):
        SkillInvocation.objects.create(conversation=compared, run=run, skill="browser-probe",
                                       caller="model", decision="allowed")
"""


@pytest.mark.parametrize("size", VIEWPORTS)
def test_a_refusal_is_said_in_words_with_the_admins_note(tab, model, chat_server, size):
    from tests.browser.server_data import run_in_server

    run_in_server(chat_server, DENY_RULE)
    model.enqueue(
        Reply.tool_use("Bash", {"command": "rm -rf old"}, id=f"toolu_deny_{size}"),
        Reply.text("I may not delete files here."),
    )
    chat = open_chat(tab, size)
    chat.new_conversation()
    chat.send("Delete the old folder")
    expect(chat.transcript.locator(".row-assistant .md").last).to_have_text(
        "I may not delete files here."
    )
    result = chat.transcript.locator('.tool[data-tool="Bash"] .tool-result')
    expect(result.locator("summary")).to_contain_text(
        "an administrator's rule does not allow Bash(rm *)"
    )
    expect(result.locator("summary")).to_contain_text("Deleting files is done by the IT desk.")
    expect(chat.transcript).not_to_contain_text("(admin #")
    expect(chat.transcript).not_to_contain_text('deny rule "')
    result.locator("summary").click()
    doc_screenshot(chat.page, f"denied-in-words-{size}")
    # The model is told the exact rule (what the audit keeps too).
    assert "(admin #" in str(model.requests[-1]["messages"])


@pytest.mark.parametrize("size", VIEWPORTS)
def test_comparison_runs_stay_out_of_the_auditors_list_and_totals(tab, model, chat_server, size):
    from tests.browser.server_data import run_in_server

    run_in_server(chat_server, SEED_COMPARISON)
    model.enqueue(Reply.text("Audited answer."))
    audrey = open_chat(tab, size, "audrey")
    audrey.new_conversation()
    audrey.send("A real question")
    expect(audrey.transcript.locator(".row-assistant .md")).to_have_text("Audited answer.")
    sidebar = audrey.page.locator("#sidebar-list")  # a closed drawer on a phone: read it anyway
    expect(sidebar).to_contain_text("A real question")
    expect(sidebar).not_to_contain_text("Compare #")
    audrey.page.goto(f"{audrey.base_url}/")
    expect(audrey.page.locator("#conversation-list")).to_contain_text("A real question")
    expect(audrey.page.locator("#conversation-list")).not_to_contain_text("Compare #")
    audrey.page.goto(f"{audrey.base_url}/audit/")
    expect(audrey.page.locator("#comparison-note")).to_contain_text(
        "invocations made by delivery-profile comparisons"
    )
    screenshot(audrey.page, f"29-audit-comparisons-apart-{size}")
    audrey.page.locator("#comparison-note").get_by_role("link", name="Show them").click()
    expect(audrey.page.locator('[data-count="total"]')).to_have_text("3")


@pytest.mark.parametrize("size", VIEWPORTS)
def test_tool_cards_show_workspace_paths_not_server_paths(tab, model, chat_server, size):
    model.enqueue(
        Reply.tool_use(
            "Bash",
            {"command": "pwd && mkdir -p out && touch out/a.txt && ls -d $PWD/out"},
            id=f"toolu_pwd_{size}",
        ),
        Reply.text("That is the workspace."),
    )
    chat = open_chat(tab, size)
    chat.new_conversation()
    chat.send("Where am I?")
    chat.approval().get_by_role("button", name="Allow once").click()
    expect(chat.transcript.locator(".row-assistant .md").last).to_have_text(
        "That is the workspace."
    )
    card = chat.transcript.locator('.tool[data-tool="Bash"]')
    card.locator(".tool-result summary").click()
    expect(card.locator(".tool-output")).to_have_text(re.compile(r"^\.\nout\n"))
    server_dir = str(chat_server.config.var_dir)
    assert server_dir not in chat.page.content()
    screenshot(chat.page, f"29-workspace-paths-{size}")
