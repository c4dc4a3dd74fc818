from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import BASE_DIR_LINE, HELPER_MARKER, PROBE_MARKER, SLASH_MARKER
from tests.browser.pages import ChatPage, screenshot
from tests.fake_anthropic import Reply, tool_use_block

pytestmark = pytest.mark.browser

HIDDEN_TEXT = (PROBE_MARKER, SLASH_MARKER, HELPER_MARKER, BASE_DIR_LINE)


def _sent_to_model(model) -> str:
    return json.dumps([dict(r) for r in model.requests])


def test_it_shows_a_model_invoked_skill_as_a_chip_and_never_its_body(tab, model):
    release, reached = model.pause()
    model.enqueue(
        Reply.tool_use("Skill", {"skill": "browser-probe", "args": "2.4.0"}),
        # The answer after the skill loaded waits, so the chip can be seen mid-turn.
        Reply.text(
            "Version 2.4.0 fixes the export button.",
            wait_for=release,
            wait_after_events=0,
            reached=reached,
        ),
    )
    chat = tab("alice")
    chat.new_conversation()
    chat.send("What changed in 2.4.0?")

    chip = chat.chip("browser-probe")
    expect(chip).to_have_count(1)
    expect(chip.locator(".chip-text")).to_have_text(
        re.compile(r'^The "browser-probe" skill (is loading|loaded)$')
    )
    expect(chip.locator(".chip-args")).to_have_text("2.4.0")
    expect(chip).to_have_attribute("data-state", "loaded")
    assert reached.wait(10), "the model was not asked again after the skill loaded"
    screenshot(chat.page, "05-skill-chip")

    release.set()
    expect(chat.transcript.locator(".row-assistant .md").last).to_have_text(
        "Version 2.4.0 fixes the export button."
    )
    expect(chat.chip("browser-probe")).to_have_count(1)
    assert PROBE_MARKER in _sent_to_model(model), "the model should have received the body"
    html = chat.page.content()
    for hidden in (PROBE_MARKER, BASE_DIR_LINE, "command-message", "command-name"):
        assert hidden not in html
    expect(chat.transcript).not_to_contain_text("Launching skill")

    # What a person sees on a phone, in dark mode: the chip fits, nothing scrolls sideways.
    chat.page.set_viewport_size({"width": 390, "height": 844})
    chat.page.emulate_media(color_scheme="dark")
    chat.reload()
    expect(chat.chip("browser-probe")).to_be_visible()
    assert chat.page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    screenshot(chat.page, "05b-skill-chip-phone-dark")


def test_it_offers_user_invocable_skills_in_the_slash_menu_and_runs_the_chosen_one(tab, model):
    model.enqueue(Reply.text("Status: the weekly sync moved to Thursday."))
    chat = tab("alice")
    chat.new_conversation()
    box = chat.message_box
    box.click()
    box.press("/")

    menu = chat.page.get_by_role("listbox", name="Skills")
    expect(menu).to_be_visible()
    # A textarea may not carry aria-expanded (axe: critical); it points at the highlighted
    # option, and the opening is announced (issue 29).
    expect(box).not_to_have_attribute("aria-expanded", re.compile(".*"))
    expect(box).to_have_attribute("aria-activedescendant", "slash-option-0")
    expect(chat.page.locator("#slash-status")).to_contain_text("match")
    names = menu.get_by_role("option").locator(".option-name").all_inner_texts()
    assert {"/browser-slash", "/browser-probe", "/commit-message"} <= set(names)
    assert "/browser-helper" not in names  # user-invocable: false
    slash = menu.get_by_role("option").filter(has_text="/browser-slash")
    expect(slash).to_contain_text("[topic]")
    expect(slash).to_contain_text("Drafts a short status note")
    screenshot(chat.page, "06-slash-menu")

    for _ in range(names.index("/browser-slash")):
        box.press("ArrowDown")
    expect(slash).to_have_attribute("aria-selected", "true")
    box.press("Enter")
    expect(menu).to_be_hidden()
    expect(box).to_have_value("/browser-slash ")

    box.press_sequentially("weekly sync")
    box.press("Enter")
    chip = chat.chip("browser-slash")
    expect(chip.locator(".chip-text")).to_have_text(
        re.compile(r'^The "browser-slash" skill (is loading|loaded)$')
    )
    expect(chip.locator(".chip-args")).to_have_text("weekly sync")
    expect(chip).to_have_attribute("data-state", "loaded")
    expect(chat.transcript.locator(".row-assistant .md")).to_have_text(
        "Status: the weekly sync moved to Thursday."
    )
    assert SLASH_MARKER in _sent_to_model(model)
    assert SLASH_MARKER not in chat.page.content()
    screenshot(chat.page, "07-slash-command-chip")


def _skill_heavy_conversation(chat: ChatPage, model) -> None:
    """A slash command, then a turn where the model loads two skills; waits for both runs."""
    model.enqueue(
        Reply.text("Here is the weekly sync note."),
        Reply.blocks(
            [
                {"type": "text", "text": "Loading what I need."},
                tool_use_block("Skill", {"skill": "browser-probe", "args": "2.4.0"}),
                tool_use_block("Skill", {"skill": "browser-helper"}),
            ]
        ),
        Reply.text("Release 2.4.0, in one line: exports work again."),
    )
    chat.new_conversation()
    chat.send("/browser-slash weekly sync")
    chat.wait_run_finished(1)
    chat.send("Summarise release 2.4.0")
    chat.wait_run_finished(2)
    expect(chat.transcript.locator(".row-assistant .md").last).to_have_text(
        "Release 2.4.0, in one line: exports work again."
    )
    for skill in ("browser-slash", "browser-probe", "browser-helper"):
        expect(chat.chip(skill)).to_have_attribute("data-state", "loaded")
    sent = _sent_to_model(model)
    assert all(marker in sent for marker in HIDDEN_TEXT), "the model must get every hidden text"


def test_it_never_sends_hidden_text_to_a_user_without_the_inspect_permission(tab, model):
    chat = tab("alice")
    _skill_heavy_conversation(chat, model)
    screenshot(chat.page, "08-hidden-content-user-view")
    live_html = chat.page.content()
    chat.reload()
    reloaded_html = chat.page.content()

    frames = chat.frames
    assert len(frames) > 20, "expected a full conversation's frames"
    for hidden in HIDDEN_TEXT:
        assert not [f for f in frames if hidden in f], f"{hidden!r} reached a websocket frame"
        assert hidden not in live_html, f"{hidden!r} is in the live page"
        assert hidden not in reloaded_html, f"{hidden!r} is in the server-rendered page"
    expect(chat.transcript.locator(".row-hidden")).to_have_count(0)
    expect(chat.page.get_by_text("Injected instructions")).to_have_count(0)
    assert chat.errors == []


def test_it_shows_an_auditor_the_hidden_text_on_demand(tab, model):
    chat = tab("audrey")
    _skill_heavy_conversation(chat, model)

    # The same collection that found nothing for alice sees the hidden text for an auditor.
    assert any(PROBE_MARKER in f for f in chat.frames)
    hidden = chat.transcript.locator(".row-hidden").filter(has_text="browser-probe")
    expect(hidden).to_have_count(1)
    expect(hidden.locator("summary")).to_contain_text("Hidden from the user")
    expect(hidden.locator("summary")).to_contain_text("sent to the model")
    body = hidden.locator("pre")
    expect(body).to_be_hidden()

    hidden.locator("summary").click()

    expect(body).to_be_visible()
    expect(body).to_contain_text(BASE_DIR_LINE)
    expect(body).to_contain_text(f"{PROBE_MARKER}: write one line about version 2.4.0.")
    screenshot(chat.page, "09-auditor-hidden-text-expanded")

    chat.reload()
    slash = chat.transcript.locator(".row-hidden").filter(has_text="browser-slash")
    slash.locator("summary").click()
    expect(slash.locator("pre")).to_contain_text(SLASH_MARKER)
