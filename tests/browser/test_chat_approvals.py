from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.pages import screenshot
from tests.support.fake_anthropic import Reply

pytestmark = pytest.mark.browser

ANSWERS = ("Allow once", "Allow for this conversation", "Deny")


def _tool_results(request) -> list[dict]:
    return [
        block
        for message in request["messages"]
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


def _result_text(block: dict) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [])


def test_it_asks_before_running_bash_and_shows_the_result_when_allowed(tab, model):
    model.enqueue(
        Reply.tool_use("Bash", {"command": "echo approved-$((40 + 2))"}, id="toolu_allow01"),
        Reply.text("The command printed approved-42."),
    )
    chat = tab("alice")
    chat.new_conversation()
    chat.send("Run the check")

    approval = chat.approval()
    expect(approval).to_be_visible()
    expect(approval).to_contain_text("Allow running a command?")
    expect(approval).to_contain_text("echo approved-$((40 + 2))")
    for name in ANSWERS:
        expect(approval.get_by_role("button", name=name, exact=True)).to_be_visible()
    screenshot(chat.page, "10-approval-prompt")

    approval.get_by_role("button", name="Allow once").click()

    expect(approval).to_have_attribute("data-status", "allow_once")
    expect(approval.get_by_role("button")).to_have_count(0)
    card = chat.transcript.locator('.tool[data-tool="Bash"]')
    expect(card.locator(".tool-summary")).to_contain_text("echo approved-")
    result = card.locator(".tool-result")
    result.locator("summary").click()
    expect(result.locator(".tool-output")).to_be_visible()
    expect(result.locator(".tool-output")).to_contain_text("approved-42")
    expect(chat.transcript.locator(".row-assistant .md").last).to_have_text(
        "The command printed approved-42."
    )
    screenshot(chat.page, "11-approved-tool-card")
    results = _tool_results(model.requests[-1])
    assert [r["tool_use_id"] for r in results] == ["toolu_allow01"]
    assert "approved-42" in _result_text(results[0])


def test_it_sends_the_denial_reason_to_the_model(tab, model):
    model.enqueue(
        Reply.tool_use("Bash", {"command": "rm -rf build"}, id="toolu_deny01"),
        Reply.text("Understood, I will leave the build folder alone."),
    )
    chat = tab("alice")
    chat.new_conversation()
    chat.send("Clean up")

    approval = chat.approval()
    expect(approval).to_contain_text("rm -rf build")
    approval.get_by_label("Reason (optional, sent with Deny)").fill("keep build-7f3a for now")
    approval.get_by_role("button", name="Deny").click()

    expect(approval).to_have_attribute("data-status", "deny")
    expect(approval).to_contain_text("keep build-7f3a for now")
    expect(chat.transcript.locator(".row-assistant .md").last).to_have_text(
        "Understood, I will leave the build folder alone."
    )
    card = chat.transcript.locator('.tool[data-tool="Bash"]')
    expect(card.locator(".tool-result")).to_have_class("tool-result is-error")
    # The card is marked as failed too (the stylesheet follows its result).
    assert card.evaluate("el => getComputedStyle(el).borderColor") == card.evaluate(
        "el => getComputedStyle(el.querySelector('.tool-result summary')).color"
    )
    screenshot(chat.page, "12-denied-with-reason")
    results = _tool_results(model.requests[-1])
    assert [r["tool_use_id"] for r in results] == ["toolu_deny01"]
    assert results[0].get("is_error") is True
    assert "keep build-7f3a for now" in _result_text(results[0])


def test_two_tabs_see_the_same_stream_and_an_answer_from_either(tab, model):
    release, reached = model.pause()
    model.enqueue(
        Reply.tool_use(
            "Bash", {"command": "date +%Y"}, text="Let me check the year first.", chunk=4
        ).with_(wait_for=release, wait_after_events=5, reached=reached),
        Reply.text("It is the year shown above."),
    )
    tab_a = tab("alice")
    conversation = tab_a.new_conversation()
    tab_b = tab("alice")
    tab_b.open(conversation)
    tab_a.send("What year is it?")

    # Both tabs see the text while it streams, before the turn is over.
    assert reached.wait(10), "the model was never asked"
    expect(tab_a.live_text).to_have_text("Let me c")
    expect(tab_b.live_text).to_have_text("Let me c")
    expect(tab_b.transcript.locator(".row-user")).to_have_text("What year is it?")
    release.set()

    approval_a, approval_b = tab_a.approval(), tab_b.approval()
    expect(approval_a).to_have_attribute("data-status", "pending")
    expect(approval_b).to_have_attribute("data-status", "pending")
    screenshot(tab_b.page, "13-second-tab-approval")
    approval_a.get_by_role("button", name="Allow for this conversation").click()

    for chat in (tab_a, tab_b):
        expect(chat.approval()).to_have_attribute("data-status", "allow_conversation")
        expect(chat.approval().get_by_role("button")).to_have_count(0)
        expect(chat.transcript.locator(".row-assistant .md").last).to_have_text(
            "It is the year shown above."
        )
    screenshot(tab_b.page, "14-second-tab-answered")
    assert tab_a.errors == [] and tab_b.errors == []
