"""The chat with JavaScript switched off in Chromium (issue 29): approve, deny, stop, edit and
regenerate are plain POSTs that redirect back to the conversation, at both widths."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest
from playwright.sync_api import Locator, Page, expect

from tests.browser.pages import doc_screenshot, screenshot
from tests.support.fake_anthropic import Reply

pytestmark = pytest.mark.browser

VIEWPORTS = {"desktop": {"width": 1440, "height": 900}, "phone": {"width": 390, "height": 844}}
EVENTS_BEFORE_TEXT = 3


@pytest.fixture
def page_without_js(browser, auth_states, request) -> Iterator[Page]:
    context = browser.new_context(
        storage_state=auth_states["alice"],
        java_script_enabled=False,
        viewport=VIEWPORTS[request.param],
    )
    try:
        yield context.new_page()
    finally:
        context.close()


def reload_until(page: Page, locator: Locator, what: str, timeout: float = 15.0) -> None:
    """Without JavaScript nothing updates by itself: reload until the server shows `locator`.

    Each try is a new page load (the run goes on in the server meanwhile), bounded in time.
    """
    deadline = time.monotonic() + timeout
    while not locator.count():
        if time.monotonic() > deadline:
            raise AssertionError(f"Timed out after {timeout} s waiting for {what}")
        page.reload()


def submit(page: Page, button: Locator) -> None:
    """Press a form's button and wait for the POST's redirect to load (no reload mid-flight)."""
    with page.expect_navigation():
        button.click()


def answers(page: Page) -> Locator:
    return page.locator("#transcript .row-assistant:not(.replaced) .md")


@pytest.mark.parametrize("page_without_js", list(VIEWPORTS), indirect=True)
def test_every_action_works_as_a_post_with_a_redirect(page_without_js, chat_server, model):
    page = page_without_js
    size = "phone" if page.viewport_size["width"] < 500 else "desktop"
    release, reached = model.pause()
    model.enqueue(
        Reply.tool_use("Bash", {"command": "echo one"}, id=f"toolu_nojs_a_{size}"),
        Reply.text("Denied, so I stopped there."),
        Reply.text("A regenerated answer."),
        Reply.tool_use("Bash", {"command": "echo two"}, id=f"toolu_nojs_b_{size}"),
        Reply.text("The edited question, answered after the command."),
        Reply.text(
            "This answer is stopped half way.",
            wait_for=release,
            wait_after_events=EVENTS_BEFORE_TEXT + 1,
            reached=reached,
        ),
    )
    page.goto(f"{chat_server.url}/c/start/")
    expect(page.get_by_role("textbox", name="Message")).to_be_visible()
    url = page.url
    assert re.search(r"/c/\d+/$", url)
    # The attach button needs the script: it is not offered.
    expect(page.get_by_role("button", name="+ Attach files")).to_be_hidden()

    page.get_by_role("textbox", name="Message").fill("Run the first check")
    submit(page, page.get_by_role("button", name="Send"))
    expect(page).to_have_url(url)
    approval = page.locator("#transcript .approval[data-status='pending']")
    reload_until(page, approval, "the approval request")
    expect(page.locator("#waiting-note")).to_be_visible()
    doc_screenshot(page, f"no-javascript-approval-{size}")
    approval.get_by_label("Reason (optional, sent with Deny)").fill("not now")
    submit(page, approval.get_by_role("button", name="Deny"))
    expect(page).to_have_url(url)
    reload_until(page, answers(page).filter(has_text="Denied, so I stopped there."), "the answer")
    expect(page.locator(".approval[data-status='deny']")).to_contain_text("not now")

    # The answer is stored before its run has ended; the button comes with the end.
    regenerate = page.get_by_role("button", name="Regenerate")
    reload_until(page, regenerate, "the Regenerate button (the run has ended)")
    submit(page, regenerate)
    expect(page).to_have_url(url)
    reload_until(page, answers(page).filter(has_text="A regenerated answer."), "the new answer")

    # Edit the (only) message: a form in <noscript>, opened as a disclosure (once the run ended).
    reload_until(page, page.locator(".edit-nojs > summary"), "the edit form (the run has ended)")
    page.locator(".edit-nojs > summary").click()
    page.get_by_role("textbox", name="Edited message").fill("Run the second check")
    submit(page, page.get_by_role("button", name="Send edited message"))
    expect(page).to_have_url(url)
    approval = page.locator("#transcript .approval[data-status='pending']")
    reload_until(page, approval, "the second approval request")
    submit(page, approval.get_by_role("button", name="Allow once"))
    reload_until(
        page,
        answers(page).filter(has_text="The edited question, answered after the command."),
        "the edited question's answer",
    )
    expect(page.locator("#transcript .row-user.replaced")).to_have_count(1)
    assert "Run the second check" in str(model.requests[-1]["messages"])

    page.get_by_role("textbox", name="Message").fill("One more, slowly")
    submit(page, page.get_by_role("button", name="Send"))
    assert reached.wait(10), "the model was never asked"
    page.reload()
    submit(page, page.get_by_role("button", name="Stop"))
    expect(page).to_have_url(url)
    reload_until(page, page.locator(".row-notice").filter(has_text="Stopped."), "the stop's note")
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    screenshot(page, f"29-nojs-stopped-{size}")
