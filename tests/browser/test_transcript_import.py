"""Importing a Claude Code session in a real browser: the result page lists the skipped lines,
the conversation shows each subagent's record beside the thread and no skill prompt, at desktop
width and at 390 px."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser.pages import screenshot

pytestmark = pytest.mark.browser

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "claude_code"


@pytest.mark.parametrize(
    ("width", "height", "label"), [(1440, 900, "desktop"), (390, 844, "phone")]
)
def test_an_imported_session_shows_what_was_skipped_and_its_subagents(
    tab, chat_server, width, height, label
):
    page = tab("alice", width=width, height=height).page
    page.goto(f"{chat_server.url}/audit/import/")
    page.set_input_files('input[type="file"]', str(FIXTURES / "malformed_lines.jsonl"))
    page.get_by_role("button", name="Import").click()
    expect(page.get_by_role("heading", name="Transcript imported")).to_be_visible()
    expect(page.get_by_role("heading", name="6 lines skipped")).to_be_visible()
    rows = page.locator("#skipped-lines tbody tr")
    expect(rows).to_have_count(6)
    expect(rows.first).to_contain_text("not valid JSON")
    screenshot(page, f"import-result-{label}")

    page.goto(f"{chat_server.url}/audit/import/")
    page.set_input_files('input[type="file"]', str(FIXTURES / "sidechains.jsonl"))
    page.get_by_role("button", name="Import").click()
    expect(page.locator("#import-result")).to_contain_text("2 subagent records kept")
    page.get_by_role("link", name="Open").click()
    subagents = page.locator("[data-subagent-record]")
    expect(subagents.first).to_be_visible()
    expect(page.locator('[data-subagent-record="1"]').first).to_contain_text(
        "Read config/a.toml and list its keys."
    )
    expect(page.locator("body")).to_contain_text("B has no host key")
    # A subagent's record is read, not acted on: no edit or regenerate inside it.
    expect(page.locator("[data-subagent-record] .edit-button")).to_have_count(0)
    expect(page.locator("[data-subagent-record] .regenerate")).to_have_count(0)
    screenshot(page, f"import-subagents-{label}")

    page.goto(f"{chat_server.url}/audit/import/")
    page.set_input_files('input[type="file"]', str(FIXTURES / "skill_prompts.jsonl"))
    page.get_by_role("button", name="Import").click()
    page.get_by_role("link", name="Open").click()
    expect(page.locator("body")).to_contain_text("The CSV is clean.")
    body = page.content()
    assert "SKILL-BODY-" not in body and "Base directory for this skill" not in body
