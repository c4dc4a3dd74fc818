"""The Rules page in Chromium: a skill manager adds a rule and tries a call against it inline at
1280 px, then at 390 px edits and deletes it, with axe and no sideways scrolling."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.browser.axe import violations
from tests.browser.pages import screenshot

pytestmark = pytest.mark.browser


def _fits(page: Page) -> bool:
    return page.evaluate(
        "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
    )


def test_a_rule_is_added_tested_and_deleted_on_the_rules_page(tab):
    chat = tab("mona", width=1280, height=900)
    page = chat.page
    page.goto(f"{chat.base_url}/skills/")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Rules").click()
    expect(page.get_by_role("heading", name="Rules", exact=True)).to_be_visible()

    # A refused rule is explained beside its field and nothing is added.
    add = page.locator("#add-rule")
    add.get_by_label("Behavior").select_option("deny")
    add.get_by_label("Rule text").fill("Bash(curl *")
    add.get_by_role("button", name="Add the rule").click()
    expect(page.locator("#id_rule_text-errors")).to_contain_text("add the closing ')'")

    add.get_by_label("Rule text").fill("Bash(curl *)")
    add.get_by_label("Note").fill("No downloads from the sandbox.")
    add.get_by_role("button", name="Add the rule").click()
    expect(page.locator("#rules-notice")).to_contain_text("Added: deny Bash(curl *).")
    rule = page.locator(".rule-row", has_text="Bash(curl *)").first
    expect(rule).to_contain_text("No downloads from the sandbox.")
    assert violations(page) == []
    screenshot(page, "rules-page-added-1280")

    tester = page.locator("#tester")
    tester.get_by_label("Tool call").fill("Bash(curl https://example.org/x.sh)")
    tester.get_by_role("button", name="Decide").click()
    result = page.locator("#tester-result")
    expect(result).to_contain_text("deny")
    expect(result.get_by_role("link")).to_contain_text("Bash(curl *)")
    assert violations(page) == []
    screenshot(page, "rules-page-tested-1280")

    page.set_viewport_size({"width": 390, "height": 844})
    tester.get_by_role("link", name="Skill(pdf)").click()
    expect(result).to_contain_text("Skill(pdf)")
    expect(tester.get_by_label("Tool call")).to_have_value("Skill(pdf)")
    assert _fits(page)
    assert violations(page) == []
    screenshot(page, "rules-page-example-390")

    page.get_by_role("link", name="Edit deny Bash(curl *)").click()
    expect(page.get_by_role("heading", name="Edit a rule")).to_be_visible()
    assert _fits(page)
    assert violations(page) == []
    screenshot(page, "rules-page-edit-390")
    page.get_by_label("Behavior").select_option("ask")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#rules-notice")).to_contain_text("Saved: ask Bash(curl *).")

    page.get_by_role("button", name="Delete ask Bash(curl *)").click()
    expect(page.locator("#rules-notice")).to_contain_text("Deleted: ask Bash(curl *).")
    expect(page.locator(".rule-row", has_text="Bash(curl *)")).to_have_count(0)
    assert _fits(page)
    screenshot(page, "rules-page-deleted-390")
