"""Trigger tests in a real browser, as the skill manager (mona): a skill uploaded with a shipped
set, queries added and imported, a run stopped while under way, a run to the end and its report,
at desktop width and at 390 px. The fake API chooses skills by the documented rule."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.browser.live_server import LiveServer
from tests.browser.pages import screenshot
from tests.browser.server_data import publish, run_in_server
from tests.support.fake_anthropic_choice import skill_chooser

pytestmark = pytest.mark.browser

SKILL = "invoice-totals"
BODY_MARKER = "INVOICE-BODY-7d1e"
SHIPPED = [
    {"query": "add up the totals of these scanned invoices", "should_trigger": True},
    {"query": "write a commit message for this change", "should_trigger": False},
]

_CLEAN_UP = """
from skills_app.models import SkillPackage
from skills_app.registry.uploads import delete_package
for package in SkillPackage.objects.filter(name={name!r}):
    delete_package(package)
"""


def _skill_folder(root: Path) -> Path:
    folder = root / SKILL
    (folder / "evals").mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {SKILL}\ndescription: Adds up invoice totals and VAT from scanned invoices.\n"
        f"---\n\n{BODY_MARKER}: sum the totals, then the VAT.\n"
    )
    (folder / "evals" / "trigger.json").write_text(json.dumps(SHIPPED))
    return folder


@pytest.fixture
def cleanup(chat_server: LiveServer) -> Iterator[None]:
    try:
        yield
    finally:
        run_in_server(chat_server, _CLEAN_UP.format(name=SKILL))


def _open_set(page: Page, base: str) -> None:
    page.goto(f"{base}/skills/triggers/")
    page.get_by_role("link", name=SKILL).click()
    expect(page.get_by_role("heading", name=f"Trigger tests: {SKILL}")).to_be_visible()


def _start_run(page: Page, repetitions: int) -> None:
    page.locator("#run-form").get_by_label("Repetitions").fill(str(repetitions))
    page.get_by_role("button", name="Estimate and run…").click()
    expect(page.locator("#estimated-cost")).to_contain_text("about $")
    page.get_by_role("button", name="Start the run").click()
    expect(page.get_by_role("heading", name="Trigger run")).to_be_visible()


def test_a_skill_manager_builds_a_set_runs_it_stops_a_run_and_reads_the_report(
    tab, chat_server, model, tmp_path, cleanup
):
    base = chat_server.url
    page = tab("mona").page
    page.goto(f"{base}/admin/skills_app/skillpackage/upload/")
    page.get_by_label("Folder").set_input_files(_skill_folder(tmp_path))
    page.get_by_role("button", name="Upload").click()
    expect(page.locator(".messagelist .success")).to_contain_text(f"Installed {SKILL}")
    publish(chat_server, SKILL)  # reviewed and made active, as on its review page

    # The set the skill shipped, then one query typed and one imported.
    _open_set(page, base)
    queries = page.locator("#trigger-queries tbody tr")
    expect(queries).to_have_count(2)
    expect(queries.first).to_contain_text("shipped")
    add = page.locator("#add-query")
    add.get_by_label("Query").fill("what VAT applies to my invoices")
    add.get_by_role("button", name="Add").click()
    expect(queries).to_have_count(3)
    importer = page.locator("#import-set")
    importer.get_by_label("or paste").fill('[{"query": "count the words", "should_trigger": "no"}]')
    importer.get_by_role("button", name="Import").click()
    expect(page.locator("#import-error")).to_contain_text("must be true or false (without quotes)")
    importer = page.locator("#import-set")
    importer.get_by_label("or paste").fill(
        '[{"query": "count the words in this invoice", "should_trigger": false}]'
    )
    importer.get_by_role("button", name="Import").click()
    expect(page.locator("#trigger-notice")).to_contain_text("added 1 query")
    expect(queries).to_have_count(4)

    # A run held after two answers, stopped from its live page.
    hold, reached = threading.Event(), threading.Event()
    model.fake.set_responder(skill_chooser(hold=hold, after=2, reached=reached))
    try:
        _start_run(page, 3)
        expect(page.locator("#trigger-run-body")).to_contain_text("2 of 12 model calls")
        page.get_by_role("button", name="Stop the run").click()
        expect(page.locator("#run-status")).to_have_text("Stopped", timeout=15_000)
    finally:
        hold.set()
    model.fake.set_responder(skill_chooser())

    # A run to the end, compared with nothing yet, then its report.
    _open_set(page, base)
    _start_run(page, 2)
    expect(page.locator("#run-status")).to_have_text("Done", timeout=20_000)
    expect(page.locator("#trigger-figures")).to_contain_text("Accuracy")
    expect(page.locator("#trigger-chart svg rect[data-series='this']")).to_have_count(4)
    expect(page.locator("#trigger-run-body")).not_to_contain_text(BODY_MARKER)
    expect(page.locator("#figure-cost")).to_contain_text("$")
    screenshot(page, "triggers-report-desktop")
    report_url = page.url
    _open_set(page, base)
    screenshot(page, "triggers-set-desktop")
    page.goto(f"{base}/skills/triggers/collisions/")
    expect(page.locator("#confusion")).to_contain_text(SKILL)
    screenshot(page, "triggers-collisions-desktop")

    # A phone's width: the tabs of one user share a browser context, so resize this one.
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(report_url)
    expect(page.locator("#run-status")).to_have_text("Done")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(page, "triggers-report-390")
    _open_set(page, base)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(page, "triggers-set-390")
