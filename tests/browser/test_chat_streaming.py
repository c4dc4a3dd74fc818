from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from tests.browser.pages import screenshot
from tests.support.fake_anthropic import Reply

pytestmark = pytest.mark.browser

# Events the fake sends before the first text delta: message_start, ping, content_block_start.
EVENTS_BEFORE_TEXT = 3


def test_it_streams_the_answer_as_markdown_and_the_stored_answer_takes_its_place(tab, model):
    answer = "Streaming starts here, then **bold words** arrive, and the answer ends with a tail."
    release, reached = model.pause()
    # Slow chunks, then a pause after the first half, so the test sees text before the end.
    model.enqueue(
        Reply.text(
            answer,
            chunk=6,
            delay=0.03,
            wait_for=release,
            wait_after_events=EVENTS_BEFORE_TEXT + 7,
            reached=reached,
        )
    )
    chat = tab("alice")
    chat.new_conversation()
    chat.send("Tell me something")

    expect(chat.transcript.locator(".row-user")).to_have_text("Tell me something")
    assert reached.wait(10), "the model was never asked"
    # Markdown while it streams (issue 29): the bold is bold before the answer ends.
    expect(chat.live_text).to_have_text(answer[:42].replace("**", ""))
    expect(chat.live_text.locator("strong")).to_have_text("bold words")
    expect(chat.live).not_to_contain_text("**")
    expect(chat.transcript).not_to_contain_text("tail")
    expect(chat.transcript.locator("strong")).to_have_count(0)
    expect(chat.page.get_by_role("button", name="Stop")).to_be_visible()
    screenshot(chat.page, "01-streaming-partial")

    release.set()
    bold = chat.transcript.locator(".row-assistant .md strong")
    expect(bold).to_have_text("bold words")
    expect(chat.transcript.locator(".row-assistant .md")).to_have_text(answer.replace("**", ""))
    expect(chat.live).to_have_count(0)
    expect(chat.page.get_by_role("button", name="Stop")).to_be_hidden()
    expect(chat.transcript).not_to_contain_text("**")
    screenshot(chat.page, "02-streaming-done-markdown")
    assert chat.errors == []


def test_it_stops_a_run_and_keeps_the_partial_text_marked(tab, model):
    answer = "The first part made it out before the stop; this second part never does."
    partial = answer[:40]
    release, reached = model.pause()
    model.enqueue(
        Reply.text(
            answer,
            chunk=8,
            wait_for=release,
            wait_after_events=EVENTS_BEFORE_TEXT + 5,
            reached=reached,
        )
    )
    chat = tab("alice")
    chat.new_conversation()
    chat.send("Write a long answer")
    assert reached.wait(10), "the model was never asked"
    expect(chat.live_text).to_have_text(partial)

    chat.page.get_by_role("button", name="Stop").click()

    chat.wait_run_finished()
    stopped = [f for f in chat.parsed_frames() if f.get("type") == "run.finished"]
    assert stopped[-1]["data"]["status"] == "stopped"
    kept = chat.transcript.locator(".row-assistant").last
    expect(kept.locator(".md")).to_have_text(partial)
    expect(kept.locator(".interrupted")).to_have_text("(interrupted)")
    expect(chat.transcript).to_contain_text("Stopped.")
    expect(chat.page.get_by_role("button", name="Stop")).to_be_hidden()
    expect(chat.transcript).not_to_contain_text("never does")
    screenshot(chat.page, "03-stopped")

    # The stop is stored: a reload shows the same marked partial answer, not a running stream.
    chat.reload()
    expect(chat.transcript.locator(".row-assistant .md")).to_have_text(partial)
    expect(chat.transcript.locator(".interrupted")).to_have_count(1)
    expect(chat.page.get_by_role("button", name="Stop")).to_be_hidden()


def test_it_shows_the_full_answer_exactly_once_after_a_reload_mid_stream(tab, model):
    words = [f"w{i:02d}" for i in range(40)]
    answer = " ".join(words) + "."
    chunks = -(-len(answer) // 5)
    release, reached = model.pause()
    # Keeps streaming through the reload, then pauses with every delta sent but the block open.
    model.enqueue(
        Reply.text(
            answer,
            chunk=5,
            delay=0.05,
            wait_for=release,
            wait_after_events=EVENTS_BEFORE_TEXT + chunks,
            reached=reached,
        )
    )
    chat = tab("alice")
    chat.new_conversation()
    chat.send("Count for me")
    expect(chat.live_text).to_contain_text("w03")
    assert not reached.is_set(), "the stream ended before the reload; slow it down"

    chat.reload()

    # Text from before the reload (server-rendered), the replay and the live tail, once each.
    assert reached.wait(10), "the stream never reached its pause"
    expect(chat.live_text).to_have_count(1)
    expect(chat.live_text).to_have_text(answer)
    screenshot(chat.page, "04-reloaded-mid-stream")

    release.set()
    final = chat.transcript.locator(".row-assistant .md")
    expect(final).to_have_count(1)
    expect(final).to_have_text(answer)
    expect(chat.live).to_have_count(0)
    text = chat.transcript.inner_text()
    assert all(text.count(word) == 1 for word in words), text


THOUGHT = "The user asks for a plan; list the steps, then check the order. " * 2
PLAN = "First gather the notes, then draft the summary, then send it for review."


def test_it_streams_the_models_thinking_into_a_collapsed_section_of_the_answer(tab, model):
    thinking_events = -(-len(THOUGHT) // 6)
    release, reached = model.pause()
    # message_start, ping, the thinking block (start, deltas, signature, stop), the text block's
    # start and 5 of its deltas: then a pause with both blocks visibly under way.
    model.enqueue(
        Reply.blocks(
            [{"type": "thinking", "thinking": THOUGHT}, {"type": "text", "text": PLAN}],
            chunk=6,
            delay=0.01,
            wait_for=release,
            wait_after_events=2 + 1 + thinking_events + 2 + 1 + 5,
            reached=reached,
        )
    )
    chat = tab("alice")
    chat.new_conversation()
    chat.send("Plan my week")
    assert reached.wait(10), "the model was never asked"

    answer = chat.live.last
    thinking = answer.locator("details.thinking")
    expect(thinking).to_have_count(1)
    expect(thinking.locator("summary")).to_have_text("Thinking")
    expect(thinking).not_to_have_attribute("open", "")
    expect(thinking.locator(".thinking-text")).to_be_hidden()  # collapsed
    expect(answer.locator(".live-text")).to_have_text(PLAN[:30])
    # The thinking comes first in the answer, like a stored thinking block.
    order = answer.locator(".bubble > *").evaluate_all("els => els.map(e => e.className)")
    assert order == ["thinking", "live-text md"]
    screenshot(chat.page, "15-thinking-collapsed-desktop")

    thinking.locator("summary").click()
    expect(thinking.locator(".thinking-text")).to_have_text(THOUGHT)
    screenshot(chat.page, "16-thinking-open-desktop")
    chat.page.set_viewport_size({"width": 390, "height": 844})
    assert chat.page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    screenshot(chat.page, "17-thinking-open-phone")

    release.set()
    expect(chat.transcript.locator(".row-assistant .md").last).to_have_text(PLAN)
    expect(chat.live).to_have_count(0)
    screenshot(chat.page, "18-thinking-done-phone")


def test_without_javascript_a_person_can_read_and_send(browser, chat_server, auth_states, model):
    model.enqueue(Reply.text("An answer for a page without scripts."))
    context = browser.new_context(
        storage_state=auth_states["alice"],
        java_script_enabled=False,
        viewport={"width": 390, "height": 844},
    )
    try:
        page = context.new_page()
        page.goto(f"{chat_server.url}/")
        page.get_by_role("button", name="New conversation").click()
        page.wait_for_url(re.compile(r"/c/\d+/$"))
        page.get_by_role("textbox", name="Message").fill("Hello from a plain form")
        page.get_by_role("button", name="Send").click()
        page.wait_for_url(re.compile(r"/c/\d+/$"))
        transcript = page.get_by_role("log", name="Transcript")
        expect(transcript.locator(".row-user")).to_have_text("Hello from a plain form")
        # No socket brings the answer: a reload does, once the run has stored it.
        deadline = time.monotonic() + 15
        while "An answer for a page without scripts." not in transcript.inner_text():
            assert time.monotonic() < deadline, "the answer never appeared"
            page.wait_for_timeout(200)
            page.reload()
        expect(transcript.locator(".row-assistant .md")).to_have_text(
            "An answer for a page without scripts."
        )
        screenshot(page, "19-no-javascript-phone")
    finally:
        context.close()


def test_a_dropped_connection_resumes_without_repeating_or_losing_text(tab, model):
    words = [f"v{i:02d}" for i in range(40)]
    answer = " ".join(words) + "."
    release, reached = model.pause()
    model.enqueue(
        Reply.text(
            answer,
            chunk=4,
            delay=0.04,
            wait_for=release,
            wait_after_events=EVENTS_BEFORE_TEXT + 30,
            reached=reached,
        )
    )
    chat = tab("alice")
    chat.new_conversation()
    chat.send("Count again")
    expect(chat.live_text).to_contain_text("v03")
    before = chat.resumed_count()
    # A new socket replaces the old one, as after a network drop: htmx reconnects, chat.js
    # resumes after the last seq it applied, and the server restarts the stream from its text.
    chat.page.evaluate(
        "document.getElementById('chat')['htmx-internal-data'].webSocket.publicInterface.reconnect()"
    )
    chat.wait_until(lambda: chat.resumed_count() > before, "the socket to resume")
    assert reached.wait(10), "the stream never reached its pause"
    expect(chat.live_text).to_have_count(1)
    # Every one of the 30 pieces sent before the pause, once, in order: 30 words of 4 characters.
    expect(chat.live_text).to_have_text(answer[: 30 * 4].rstrip())
    release.set()
    final = chat.transcript.locator(".row-assistant .md")
    expect(final).to_have_text(answer)
    text = chat.page.locator("#main").inner_text()
    assert all(text.count(word) == 1 for word in words), text
    assert chat.errors == []
