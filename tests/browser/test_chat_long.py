"""A long conversation in a real browser: the newest rows first, earlier ones loaded by scrolling
up (or the button) without moving what the person is reading, and the live socket still working,
at 1280 and 390 px."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from skills_app.chat.conversations import PAGE_ROWS
from tests.browser.pages import screenshot
from tests.browser.server_data import run_in_server
from tests.support.fake_anthropic import Reply

pytestmark = pytest.mark.browser

ROWS = PAGE_ROWS * 2 + 50

LONG_CONVERSATION = """
from django.contrib.auth import get_user_model
from skills_app.models import Conversation, Message
alice = get_user_model().objects.get(username="alice")
conversation = Conversation.objects.create(owner=alice, title="A long conversation")
Message.objects.bulk_create(
    Message(conversation=conversation, seq=seq, role="user" if seq % 2 else "assistant",
            content=[{{"type": "text", "text": f"Long message {{seq}}"}}])
    for seq in range(1, {rows} + 1)
)
print(json.dumps({{"conversation": conversation.pk}}))
"""


def view(page, name: str) -> None:
    """A screenshot of what is on the screen (the whole page is tens of thousands of pixels)."""
    screenshot(page, name, full_page=False)


def text_rows(page):
    return page.locator("#transcript-earlier .row, #transcript .row").filter(
        has_text="Long message"
    )


@pytest.mark.parametrize(
    ("width", "height", "label"), [(1280, 800, "desktop"), (390, 844, "phone")]
)
def test_earlier_messages_load_above_without_moving_the_page(
    tab, chat_server, model, width, height, label
):
    out = run_in_server(chat_server, LONG_CONVERSATION.format(rows=ROWS))
    conversation = json.loads(out.strip().splitlines()[-1])["conversation"]
    chat = tab("alice", width=width, height=height)
    chat.open(conversation)
    page = chat.page

    expect(text_rows(page)).to_have_count(PAGE_ROWS)
    expect(page.locator("#transcript")).to_contain_text(f"Long message {ROWS}")
    control = page.get_by_role("link", name="Load earlier messages")
    expect(page.locator("#load-earlier")).to_contain_text(f"{ROWS - PAGE_ROWS} earlier messages")

    # Scrolling to the top reveals the control, which asks for the page before. That first
    # request is made to fail here, so the control stays in view for the screenshot.
    failed = []

    def fail(route):
        failed.append(route.request.url)
        route.abort()

    page.route("**/earlier/**", fail)
    oldest_shown = page.locator("#transcript .row").first
    # Where that row is on the page; at the top of the page, it is where it is on the screen.
    top = oldest_shown.evaluate("row => row.getBoundingClientRect().top + window.scrollY")
    page.evaluate("window.scrollTo(0, 0)")
    chat.wait_until(lambda: bool(failed), "the earlier page to be asked for")
    page.unroute("**/earlier/**", fail)
    view(page, f"chat-long-top-{label}")
    chat.errors.clear()  # the failed request's own complaints

    # A click loads it above what is read: the row at the top of the screen stays there.
    control.click()
    expect(text_rows(page)).to_have_count(PAGE_ROWS * 2)
    assert abs(oldest_shown.bounding_box()["y"] - top) < 2
    expect(page.locator("#transcript-earlier")).to_contain_text(f"Long message {ROWS - PAGE_ROWS}")
    view(page, f"chat-long-loaded-{label}")
    # Only the latest answer can be regenerated, not one loaded from earlier.
    expect(page.locator("#transcript-earlier .regenerate").first).to_be_hidden()

    # Scrolling up to the next control loads the first page: none is left to load.
    page.evaluate("window.scrollTo(0, 0)")
    expect(text_rows(page)).to_have_count(ROWS)
    expect(control).to_have_count(0)
    expect(page.locator("#transcript-earlier .row").first).to_contain_text("Long message 1")
    page.evaluate("window.scrollTo(0, 0)")
    view(page, f"chat-long-start-{label}")
    texts = " ".join(text_rows(page).all_inner_texts())
    assert [int(n) for n in re.findall(r"Long message (\d+)", texts)] == list(range(1, ROWS + 1))

    # The socket still resumes and delivers: a new answer lands at the end.
    model.enqueue(Reply.text("The newest answer."))
    chat.send("And now?")
    chat.wait_run_finished()
    expect(page.locator("#transcript .row").last).to_contain_text("The newest answer.")
    assert chat.errors == []
