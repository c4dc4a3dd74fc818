"""Issue 11 in a real browser: a Read of SKILL.md is a placeholder for a chatter, whole for an inspector.

The card's result is filtered on the server before it is sent (never hidden with CSS): the
page's HTML and every websocket frame the chatter's tab received lack the body. The same run
for an inspector shows the body in the card. Screenshots of both, with the result opened.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import PROBE_MARKER
from tests.browser.pages import ChatPage, screenshot
from tests.support.fake_anthropic import Reply

pytestmark = pytest.mark.browser

PLACEHOLDER = "[hidden skill file browser-probe/SKILL.md withheld:"


def _read_skill_file(chat: ChatPage, model) -> None:
    model.enqueue(
        Reply.tool_use("Skill", {"skill": "browser-probe", "args": "2.5.0"}),
        Reply.tool_use("Read", {"file_path": "skills/browser-probe/SKILL.md"}),
        Reply.text("I read the skill's instructions; version 2.5.0 adds dark mode."),
    )
    chat.new_conversation()
    chat.send("What does the probe skill say?")
    chat.wait_run_finished(timeout=20)
    card = chat.transcript.locator('.tool[data-tool="Read"]')
    expect(card).to_have_count(1)
    card.locator(".tool-result summary").click()  # open the result, as a person would
    expect(card.locator(".tool-output")).to_be_visible()


def test_a_read_of_skill_md_is_a_placeholder_for_a_chatter(tab, model):
    chat = tab("alice")
    _read_skill_file(chat, model)
    output = chat.transcript.locator('.tool[data-tool="Read"] .tool-output')
    expect(output).to_contain_text(PLACEHOLDER)
    screenshot(chat.page, "11-read-skill-md-chatter")
    assert PROBE_MARKER in str([dict(r) for r in model.requests])  # the model got the body
    assert PROBE_MARKER not in chat.page.content()
    assert all(PROBE_MARKER not in frame for frame in chat.frames)
    # After a reload (the page path, not the live one) it is still the placeholder.
    chat.reload()
    chat.transcript.locator('.tool[data-tool="Read"] .tool-result summary').click()
    expect(output).to_contain_text(PLACEHOLDER)
    assert PROBE_MARKER not in chat.page.content()


def test_a_read_of_skill_md_is_shown_whole_to_an_inspector(tab, model):
    chat = tab("audrey")
    _read_skill_file(chat, model)
    output = chat.transcript.locator('.tool[data-tool="Read"] .tool-output')
    expect(output).to_contain_text(PROBE_MARKER)
    expect(output).not_to_contain_text("withheld")
    screenshot(chat.page, "11-read-skill-md-inspector")
