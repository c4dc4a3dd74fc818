"""A chat people reach for every day (issue 29), in Chromium at 1440x900 and 390x844: a clean stop,
the composer that says when the answer waits for the person, copy buttons, Markdown while it
streams, the first screen, titles and times, editing an earlier message, jump to the newest."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import PROBE_MARKER
from tests.browser.pages import ChatPage, screenshot
from tests.fake_anthropic import Reply

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
    screenshot(chat.page, f"29-stopped-{size}")

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
    screenshot(chat.page, f"29-copy-{size}")
    assert chat.errors == []


# -- Markdown while it streams, and nothing it says becomes markup ----------------------------------

HOSTILE = (
    "Formatting **works** while it streams.\n\n"
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
            wait_after_events=3 + len(HOSTILE) // 9 - 1,
            reached=reached,
        )
    )
    chat = open_chat(tab, size)
    chat.new_conversation()
    chat.send("Say something hostile")
    assert reached.wait(10), "the model was never asked"
    expect(chat.live_text.locator("strong")).to_have_text("works")
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
    # A refused link keeps its words and loses its address, as the server's sanitiser does.
    expect(chat.live_text).to_contain_text("a link and tabbed and data")
    screenshot(chat.page, f"29-streamed-markdown-{size}")

    release.set()
    expect(chat.transcript.locator(".row-assistant .md")).to_contain_text("THE-END")
    seen = chat.page.evaluate(NO_MARKUP)
    assert seen["pwned"] is None and seen["scripts"] == 0 and seen["images"] == 0
    # The stored answer (the server's render) allows the same links as the streamed one did.
    assert seen["links"] == ["https://example.org/a", "https://example.org/p.png"]
    assert chat.errors == []
