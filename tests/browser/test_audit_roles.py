"""The audit trail and roles in a real browser: a chatter (alice), a skill manager (mona) and an
auditor (audrey) each see what their role allows and nothing leads them to a 403."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import PROBE_MARKER
from tests.browser.live_server import LiveServer
from tests.browser.pages import REPO, doc_screenshot, screenshot
from tests.browser.server_data import ADMIN, create_admin, seed_history
from tests.support.fake_anthropic import Reply

pytestmark = pytest.mark.browser

DOCS = REPO / "docs"


def _menu(page: Page) -> list[str]:
    return page.locator("nav.topnav a").all_inner_texts()


@pytest.fixture
def history(chat_server: LiveServer) -> dict[str, int]:
    return seed_history(chat_server)


def test_a_chatter_deletes_a_conversation_and_the_auditor_still_reads_it(tab, model, chat_server):
    model.enqueue(
        Reply.tool_use("Skill", {"skill": "browser-probe", "args": "9.9.0"}),
        Reply.text("Version 9.9.0 renames the export button."),
    )
    chat = tab("alice")
    conversation = chat.new_conversation()
    chat.send("What changed in 9.9.0?")
    chat.wait_run_finished()

    page = chat.page
    page.get_by_role("link", name="Delete").first.click()
    expect(page.get_by_text("kept for the audit")).to_be_visible()
    page.get_by_role("button", name="Delete conversation").click()
    expect(page.get_by_role("heading", name="Conversations")).to_be_visible()
    expect(page.locator(f'a[href="/c/{conversation}/"]')).to_have_count(0)
    assert _menu(page) == ["Skills", "Usage"]
    assert page.goto(f"{chat_server.url}/c/{conversation}/").status == 404
    assert page.goto(f"{chat_server.url}/audit/").status == 403

    audit = tab("audrey").page
    audit.goto(f"{chat_server.url}/audit/?state=deleted&skill=browser-probe")
    row = audit.locator("#audit-rows tbody tr").filter(has_text=f"#{conversation}")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("deleted by the owner at")
    row.locator("td").first.get_by_role("link").click()
    expect(audit.get_by_role("heading", level=1)).to_contain_text("browser-probe")
    expect(audit.locator("#injected-text")).to_contain_text(PROBE_MARKER)
    expect(audit.locator(".deleted-badge")).to_contain_text("deleted by the owner at")
    audit.get_by_role("link", name=re.compile("What changed|New conversation")).first.click()
    expect(audit.locator(".deleted-banner")).to_contain_text("Its owner no longer sees it")

    manager = tab("mona").page
    manager.goto(f"{chat_server.url}/")
    assert "Audit" not in _menu(manager)
    assert manager.goto(f"{chat_server.url}/audit/").status == 403


@pytest.mark.parametrize(
    ("user", "expected"),
    [
        ("alice", ["Skills", "Usage"]),
        ("mona", ["Skills", "Rules", "Usage", "Compare", "Operations", "Admin"]),
        ("audrey", ["Skills", "Rules", "Usage", "Audit", "Compare", "Operations", "Admin"]),
    ],
)
def test_each_role_is_shown_only_links_it_can_use(tab, chat_server, user, expected):
    page = tab(user).page
    page.goto(f"{chat_server.url}/")
    assert _menu(page) == expected
    hrefs = page.locator("nav.topnav a").evaluate_all("links => links.map(a => a.href)")
    for href in hrefs:
        response = page.goto(href)
        assert response is not None and response.status == 200, href
        expect(page.locator("body")).not_to_contain_text("have permission to view or edit anything")
    if "Admin" in expected:
        page.goto(f"{chat_server.url}/admin/")
        modules = page.locator("#content-main").inner_text()
        if user == "mona":
            assert "Skill packages" in modules and "Permission rules" in modules
            assert "Skill invocations" not in modules and "Users" not in modules
        else:
            assert "Skill invocations" in modules and "Audit events" in modules
            page.goto(f"{chat_server.url}/admin/skills_app/skillinvocation/")
            expect(page.locator(".object-tools .addlink")).to_have_count(0)
            expect(page.locator("select[name=action]")).to_have_count(0)


def test_the_audit_home_filters_charts_and_exports_for_the_auditor(tab, chat_server, history):
    page = tab("audrey", width=1280, height=1100).page
    page.goto(f"{chat_server.url}/")
    page.get_by_role("link", name="Audit", exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("which skills ran")
    expect(page.locator("#audit-chart svg rect").first).to_be_visible()
    assert page.locator("#audit-chart svg rect").count() > 10
    expect(page.locator(".chart-legend")).to_contain_text("pdf")
    page.get_by_role("textbox", name="User").fill("carol")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator('[data-count="users"]')).to_have_text("1")
    total = int(page.locator('[data-count="total"]').inner_text())
    assert total > 20
    doc_screenshot(page, "40-audit-home", doc=DOCS / "audit-home.png", full_page=False)

    page.get_by_role("combobox", name="Skill", exact=True).fill("pdf")
    page.get_by_label("Decision").select_option("allowed")
    page.get_by_role("button", name="Filter").click()
    skills = page.locator("#audit-rows tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.skill)"
    )
    assert skills and set(skills) == {"pdf"}
    count = int(page.locator('[data-count="total"]').inner_text())

    with page.expect_download() as download:
        page.get_by_role("link", name=re.compile("Export these")).click()
    path = Path(download.value.path())
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    assert len(rows) == count and {r["skill"] for r in rows} == {"pdf"}
    assert all(r["user"] == "carol" and r["decision"] == "allowed" for r in rows)
    assert "Instructions of pdf." in rows[0]["injected_text"]

    page.locator("#audit-rows tbody tr").first.locator("td").first.get_by_role("link").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("pdf")
    screenshot(page, "40-audit-invocation-from-home")


def test_the_roles_page_shows_roles_before_raw_permissions(browser: Browser, chat_server):
    create_admin(chat_server)
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    try:
        page.goto(f"{chat_server.url}/admin/")
        page.get_by_label("Username").fill(ADMIN[0])
        page.get_by_label("Password").fill(ADMIN[1])
        page.get_by_role("button", name="Log in").click()
        page.goto(f"{chat_server.url}/admin/auth/user/?role=auditor")
        expect(page.locator("#result_list")).to_contain_text("audrey")
        expect(page.locator("#result_list")).not_to_contain_text("mona")
        page.locator("#result_list").get_by_role("link", name="audrey").click()
        page.wait_for_url(re.compile(r"/admin/auth/user/\d+/change/"))
        # text_content: the admin draws these headings in capitals with CSS.
        headings = [h.strip() for h in page.locator("fieldset h2").all_text_contents()]
        assert headings.index("Roles") < headings.index("Personal info")
        assert headings[-1].startswith("Raw permissions")
        expect(page.locator("fieldset").filter(has_text="Roles").first).to_contain_text(
            "Skill manager: Uploads skills"
        )
        doc_screenshot(page, "roles-page", doc=DOCS / "roles-page.png", full_page=False)
    finally:
        context.close()
