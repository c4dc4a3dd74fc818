"""Daily use of the chat in Chromium (issue 13): the sidebar and titles, nothing typed is lost
(queue, drafts), slash commands as the user's own message, edit and regenerate, the Markdown
export, and phone width on every page for each role."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import SLASH_MARKER
from tests.browser.pages import ChatPage, doc_screenshot
from tests.support.fake_anthropic import Reply

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}
# Events the fake sends before the first text delta: message_start, ping, content_block_start.
EVENTS_BEFORE_TEXT = 3


def sidebar(chat: ChatPage):
    return chat.page.get_by_role("complementary", name="Conversations")


def test_the_sidebar_groups_titles_highlights_and_becomes_a_drawer_on_a_phone(tab, model):
    model.enqueue(Reply.text("Here is a plan."), Reply.text("Another answer."))
    chat = tab("alice")
    older = chat.new_conversation()
    chat.send("Draft the quarterly report outline")
    # The demo-free title without a title model: the first message, set live after the answer.
    expect(chat.page.locator("#conversation-title")).to_have_text(
        "Draft the quarterly report outline"
    )
    current = chat.new_conversation()
    chat.send("Plan the release notes for version two")
    expect(chat.page.locator("#conversation-title")).to_have_text(
        "Plan the release notes for version two"
    )
    side = sidebar(chat)
    expect(side.get_by_role("heading", name="Today")).to_be_visible()
    link = side.locator(f"#sidebar-conversation-{current}")
    expect(link).to_have_attribute("aria-current", "page")
    expect(link).to_have_text("Plan the release notes for version two")
    expect(side.locator(f"#sidebar-conversation-{older}")).not_to_have_attribute(
        "aria-current", "page"
    )
    # Search narrows the list without leaving the page.
    side.get_by_role("searchbox", name="Search conversations").fill("quarterly")
    expect(side.locator(f"#sidebar-conversation-{current}")).to_have_count(0)
    expect(side.locator(f"#sidebar-conversation-{older}")).to_be_visible()
    side.get_by_role("searchbox", name="Search conversations").fill("")
    expect(side.locator(f"#sidebar-conversation-{current}")).to_be_visible()
    chat.page.locator("#message-input").focus()
    doc_screenshot(chat.page, "sidebar-desktop")

    # Collapsed, and still collapsed after a reload.
    toggle = chat.page.locator(".chat-head .sidebar-toggle")
    toggle.click()
    expect(side).to_be_hidden()
    chat.reload()
    expect(side).to_be_hidden()
    toggle.click()
    expect(side).to_be_visible()

    # On a phone: a drawer, closed at first, over the chat when opened; nothing scrolls sideways.
    chat.page.set_viewport_size(PHONE)
    expect(side).to_be_hidden()
    assert chat.page.evaluate("document.documentElement.scrollWidth") <= 390
    doc_screenshot(chat.page, "chat-phone")
    toggle.click()
    expect(side).to_be_visible()
    expect(side.locator(f"#sidebar-conversation-{older}")).to_be_visible()
    doc_screenshot(chat.page, "sidebar-phone-drawer")
    side.get_by_role("button", name="Close").click()
    expect(side).to_be_hidden()
    # New from the sidebar opens an empty conversation.
    toggle.click()
    side.get_by_role("button", name="New").click()
    chat.page.wait_for_url(re.compile(rf"/c/(?!{current}/)\d+/$"))
    assert chat.errors == []


def test_a_message_sent_while_busy_is_queued_everywhere_cancelable_and_sent_after(tab, model):
    release, reached = model.pause()
    model.enqueue(
        Reply.text(
            "The first answer, slowly.",
            wait_for=release,
            wait_after_events=EVENTS_BEFORE_TEXT,
            reached=reached,
        ),
        Reply.text("The answer to the queued one."),
    )
    chat = tab("alice")
    conversation = chat.new_conversation()
    chat.send("first question")
    assert reached.wait(10), "the model was never asked"
    chat.send("typed while the answer is written")
    chat.send("this one I take back")
    queued = chat.transcript.locator(".row-queued")
    expect(queued).to_have_count(2)
    expect(queued.first).to_contain_text("queued")

    # Another tab of the same person sees the queue, and so does a reload.
    other = tab("alice")
    other.open(conversation)
    expect(other.transcript.locator(".row-queued")).to_have_count(2)
    other.transcript.locator(".row-queued").last.get_by_role(
        "button", name="Cancel the queued message"
    ).click()
    expect(queued).to_have_count(1)
    doc_screenshot(chat.page, "chat-queued")
    chat.reload()
    expect(chat.transcript.locator(".row-queued")).to_have_count(1)

    release.set()
    expect(chat.transcript.locator(".row-queued")).to_have_count(0)
    expect(chat.transcript.locator(".row-user .bubble")).to_have_text(
        ["first question", "typed while the answer is written"]
    )
    expect(chat.transcript.locator(".row-assistant .md").last).to_have_text(
        "The answer to the queued one."
    )
    assert "this one I take back" not in str([dict(r) for r in model.requests])
    assert chat.errors == [] and other.errors == []


def test_a_draft_survives_a_reload_and_a_refused_message_stays_in_the_box(tab, model):
    chat = tab("alice")
    chat.new_conversation()
    chat.message_box.fill("half a thought I have not sent")
    chat.reload()
    expect(chat.message_box).to_have_value("half a thought I have not sent")
    # Refused by the server (too long): the text comes back to the box, with the reason.
    too_long = "x" * 32_001
    chat.message_box.fill(too_long)
    chat.page.get_by_role("button", name="Send").click()
    expect(chat.transcript.locator(".notice-error")).to_contain_text("too long")
    expect(chat.message_box).to_have_value(too_long)


def test_a_slash_command_stays_the_users_message_in_chat_reload_and_exports(tab, model):
    model.enqueue(Reply.text("Status: all green."))
    chat = tab("alice")
    conversation = chat.new_conversation()
    chat.send("/browser-slash weekly sync")
    command = chat.transcript.locator(".row-user .bubble.command")
    expect(command).to_have_text("/browser-slash weekly sync")
    expect(chat.transcript.locator(".row-assistant .md")).to_have_text("Status: all green.")
    chat.reload()
    expect(command).to_have_text("/browser-slash weekly sync")

    base = f"{chat.base_url}/audit/conversations/{conversation}/export"
    markdown = chat.page.request.get(f"{base}.md").text()
    assert "## You (command)\n\n```\n/browser-slash weekly sync\n```" in markdown
    assert "Status: all green." in markdown and SLASH_MARKER not in markdown
    jsonl = chat.page.request.get(f"{base}.jsonl").text()
    assert '"kind": "command"' in jsonl and "/browser-slash weekly sync" in jsonl

    # The auditor's Markdown has the injected text, marked as hidden from the user.
    audrey = tab("audrey")
    audited = audrey.page.request.get(f"{base}.md").text()
    assert SLASH_MARKER in audited and "[Hidden from the user]" in audited


def test_edit_and_regenerate_replace_turns_that_stay_visible_as_replaced(tab, model):
    model.enqueue(
        Reply.text("An answer to the typo."),
        Reply.text("An answer to the fixed question."),
        Reply.text("A regenerated answer."),
    )
    chat = tab("alice")
    conversation = chat.new_conversation()
    chat.send("Whta is a skill?")
    expect(chat.transcript.locator(".row-assistant .md")).to_have_text("An answer to the typo.")

    chat.transcript.get_by_role("button", name="Edit", exact=True).click()
    chat.transcript.get_by_role("textbox", name="Edited message").fill("What is a skill?")
    chat.transcript.get_by_role("button", name="Send edited message").click()
    expect(chat.transcript.locator(".row-assistant:not(.replaced) .md")).to_have_text(
        "An answer to the fixed question."
    )
    expect(chat.transcript.locator(".row.replaced")).to_have_count(2)
    # Distinct within alice's list (issue 42): the accessibility tests title theirs the same.
    expect(chat.page.locator("#conversation-title")).to_have_text(
        re.compile(r"^What is a skill\?( \(\d+\))?$")
    )
    expect(chat.transcript.locator(".row-user.replaced .replaced-note")).to_contain_text(
        "replaced by an edit"
    )
    # Only the latest message offers Edit; only the latest answer offers Regenerate.
    expect(chat.transcript.get_by_role("button", name="Edit", exact=True)).to_have_count(1)
    expect(chat.transcript.get_by_role("button", name="Regenerate")).to_have_count(1)

    chat.transcript.get_by_role("button", name="Regenerate").click()
    expect(chat.transcript.locator(".row-assistant:not(.replaced) .md")).to_have_text(
        "A regenerated answer."
    )
    expect(chat.transcript.locator(".row.replaced")).to_have_count(3)
    doc_screenshot(chat.page, "chat-edited-and-regenerated")
    chat.reload()
    expect(chat.transcript.locator(".row.replaced")).to_have_count(3)
    history = str(model.requests[-1]["messages"])
    assert "Whta" not in history and "fixed question." not in history

    # The auditor sees what was replaced and when.
    audrey = tab("audrey")
    audrey.page.goto(f"{chat.base_url}/audit/conversations/{conversation}/")
    expect(audrey.page.locator(".row.replaced")).to_have_count(3)
    expect(audrey.page.locator(".row-user.replaced .replaced-note")).to_contain_text(
        # In the reader's own time zone, named in the time's title (issue 29).
        re.compile(r"replaced by an edit · \d\d:\d\d · ")
    )
    audited = audrey.page.request.get(
        f"{chat.base_url}/audit/conversations/{conversation}/export.md"
    ).text()
    assert audited.count("Replaced by") == 3
    assert chat.errors == []


# What sticks out past the viewport's right edge (for the failure message).
WIDEST = """() => [...document.querySelectorAll("body *")]
  .filter((el) => el.getBoundingClientRect().right > window.innerWidth + 0.5)
  .slice(-3)
  .map((el) => el.tagName.toLowerCase() + (el.className ? "." + String(el.className).replace(/ /g, ".") : ""))"""


# Pages below the menu's, per role (the menu's own are found on the page).
EXTRA_PAGES = {
    "alice": ["/audit/import/"],
    "mona": ["/skills/triggers/", "/skills/triggers/collisions/"],
    "audrey": [
        "/audit/invocations/",
        "/audit/conversations/",
        "/audit/costs/",
        "/audit/trigger-runs/",
        "/audit/import/",
    ],
}


# Pages every role reaches from the menu, plus the chat and the list.
def _pages_of(page: Page, base: str) -> list[str]:
    page.goto(f"{base}/")
    hrefs = page.locator(".topnav a").evaluate_all("links => links.map(a => a.href)")
    return [f"{base}/", *dict.fromkeys(h for h in hrefs if h.startswith(base))]


def test_an_approval_and_a_tool_card_with_long_paths_fit_a_phone(tab, model):
    path = "/srv/skillscope/var/workspaces/12/out/" + "quarterly-report-" * 8 + "final.md"
    model.enqueue(
        Reply.tool_use("Bash", {"command": f"wc -c {path}"}, id="toolu_phone01"),
        Reply.text("Done."),
    )
    chat = tab("alice", width=PHONE["width"], height=PHONE["height"])
    chat.new_conversation()
    chat.send("Count the bytes")
    expect(chat.approval()).to_be_visible()
    assert chat.page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    doc_screenshot(chat.page, "phone-width-approval")
    chat.approval().get_by_role("button", name="Deny").click()
    expect(chat.transcript.locator(".row-assistant .md").last).to_have_text("Done.")
    assert chat.page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
