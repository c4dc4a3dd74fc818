from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.pages import screenshot
from tests.support.fake_anthropic import Reply

pytestmark = pytest.mark.browser


def test_the_picker_changes_the_model_and_the_answer_shows_its_cost_on_hover(tab, model):
    chat = tab("alice")
    chat.new_conversation()
    picker = chat.page.locator("#model-picker")
    expect(picker.locator("summary")).to_contain_text("Model: Claude Opus 4.8")

    picker.locator("summary").click()
    picker.get_by_label("Model", exact=True).select_option("claude-sonnet-5")
    picker.get_by_label("Thinking", exact=True).select_option("off")
    picker.get_by_label("Effort", exact=True).select_option("low")
    screenshot(chat.page, "11-model-picker-open")
    before = chat.resumed_count()
    picker.get_by_role("button", name="Save").click()
    chat.wait_until(lambda: chat.resumed_count() > before, "the page to reload after Save")
    expect(picker.locator("summary")).to_have_text("Model: Claude Sonnet 5 · effort low")

    model.enqueue(Reply.text("Hello from the picked model."))
    chat.send("Which model are you?")
    chat.wait_run_finished()
    sent = model.requests[-1]
    assert sent["model"] == "claude-sonnet-5"
    assert sent["thinking"] == {"type": "disabled"} and sent["output_config"] == {"effort": "low"}

    answer = chat.transcript.locator(".row-assistant").last
    expect(answer.locator(".md")).to_have_text("Hello from the picked model.")
    usage = answer.locator(".usage")
    detail = usage.locator(".usage-detail")
    expect(usage.locator(".usage-summary")).to_contain_text("$0.0")
    expect(detail).to_be_hidden()
    usage.hover()
    expect(detail).to_be_visible()
    used = sent.usage
    tokens = (
        used["input_tokens"] + used["cache_creation_input_tokens"] + used["cache_read_input_tokens"]
    )
    expect(detail).to_contain_text(f"Claude Sonnet 5 · {tokens:,} input tokens")
    expect(detail).to_contain_text("output tokens · $0.0")
    screenshot(chat.page, "12-picker-and-cost-on-hover")

    chat.reload()
    expect(chat.page.locator("#conversation-cost")).to_contain_text("$0.0")
    expect(chat.page.locator("#model-picker summary")).to_have_text(
        "Model: Claude Sonnet 5 · effort low"
    )
