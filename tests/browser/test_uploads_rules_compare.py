"""Uploads that take real skills, rules you can't get wrong and the comparison page, in a real
browser, as a skill manager (mona), a chatter (alice) and an auditor (audrey)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.browser.live_server import LiveServer
from tests.browser.pages import screenshot
from tests.browser.server_data import publish, run_in_server, seed_history
from tests.support.fake_anthropic import Reply

pytestmark = pytest.mark.browser

ORG_SKILL = "office-helper-notes"
PERSONAL_SKILL = "my-office-helper"
DESCRIPTION = ("Builds and checks office documents from notes, keeps their styles. " * 16)[:1068]

# Leaves the shared live server as the other browser tests expect it (nothing used these skills,
# so they are deleted rather than disabled; the rules are configuration, not audit).
_CLEAN_UP = """
from skills_app.models import PermissionRule, SkillPackage
from skills_app.registry.uploads import delete_package
for package in SkillPackage.objects.filter(name__in={names!r}):
    delete_package(package)
PermissionRule.objects.filter(author__username="mona").delete()
"""


def _skill_folder(root: Path, name: str) -> Path:
    """A folder shaped like the official office skills: long description, routes, empty files."""
    folder = root / name
    files = {
        "SKILL.md": (
            f"---\nname: {name}\ndescription: {DESCRIPTION}\n"
            "disable-model-invocation: true\n---\n\n"
            "Send drafts with `POST /v1/messages` and list models with `GET /v1/models`.\n"
            "Run `scripts/office/pack.py` to pack the document.\n"
        ),
        "scripts/__init__.py": "",
        "scripts/office/__init__.py": "",
        "scripts/office/helpers/__init__.py": "",
        "scripts/office/pack.py": "print('packed')\n",
    }
    for relative, text in files.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder


@pytest.fixture
def cleanup(chat_server: LiveServer) -> Iterator[None]:
    try:
        yield
    finally:
        run_in_server(chat_server, _CLEAN_UP.format(names=[ORG_SKILL, PERSONAL_SKILL]))


def _status(page: Page, url: str) -> int:
    response = page.goto(url)
    assert response is not None
    return response.status


def test_official_shaped_skills_upload_in_the_admin_picker_and_on_the_skills_page(
    tab, chat_server, tmp_path, cleanup
):
    base = chat_server.url
    # The skill manager uploads a folder with empty __init__.py files in the admin's picker.
    manager = tab("mona").page
    manager.goto(f"{base}/admin/skills_app/skillpackage/upload/")
    manager.get_by_label("Folder").set_input_files(_skill_folder(tmp_path / "org", ORG_SKILL))
    manager.get_by_role("button", name="Upload").click()
    expect(manager.locator(".messagelist .success")).to_contain_text(f"Installed {ORG_SKILL}")
    installed = manager.get_by_role("region", name=f"Installed {ORG_SKILL}")
    # The spec's overshoot, and the run-time lint: the script is named relative to the workspace.
    expect(installed.locator(".problem-rule")).to_have_text(["description-length", "script-path"])
    expect(installed).not_to_contain_text("absolute-path")
    screenshot(manager, "41-admin-folder-with-empty-files")
    publish(chat_server, ORG_SKILL)  # reviewed and made active, as on its review page

    # The chatter uploads the same shape as a personal skill on the Skills page.
    chatter = tab("alice").page
    chatter.goto(f"{base}/skills/")
    chatter.get_by_label("Folder").set_input_files(
        _skill_folder(tmp_path / "personal", PERSONAL_SKILL)
    )
    chatter.get_by_role("button", name="Upload").click()
    report = chatter.locator("#upload-report")
    expect(report).to_contain_text(f"Installed {PERSONAL_SKILL}")
    expect(report).to_contain_text("description-length")
    row = chatter.locator(f'#skill-catalog tr[data-skill="{PERSONAL_SKILL}"]')
    expect(row).to_contain_text("personal")
    assert "Admin" not in chatter.locator("nav.topnav").inner_text()
    assert _status(chatter, f"{base}/admin/skills_app/skillpackage/upload/") == 200
    expect(chatter.get_by_text("not authorized to access this page")).to_be_visible()

    # The skill manager sees the org skill's warning in the developer view; the auditor sees
    # the catalog (who published and reviewed it) and has no upload button.
    manager.goto(f"{base}/skills/")
    expect(manager.locator(f'#skills-table tr[data-skill="{ORG_SKILL}"]')).to_contain_text(
        "1 warning(s)"
    )
    auditor = tab("audrey").page
    auditor.goto(f"{base}/skills/")
    expect(auditor.locator(f'#skill-catalog tr[data-skill="{ORG_SKILL}"]')).to_contain_text(
        "rita on "
    )
    expect(auditor.locator("#skills-table")).to_have_count(0)
    auditor.goto(f"{base}/admin/skills_app/skillpackage/")
    expect(auditor.locator("#result_list")).to_contain_text(ORG_SKILL)
    expect(auditor.get_by_role("link", name="Upload skill")).to_have_count(0)
    assert _status(auditor, f"{base}/admin/skills_app/skillpackage/upload/") == 403


def test_a_rule_for_a_missing_skill_warns_and_the_auditor_replays_a_stored_call(
    tab, chat_server, cleanup
):
    base = chat_server.url
    ids = seed_history(chat_server)

    manager = tab("mona").page
    manager.goto(f"{base}/admin/skills_app/permissionrule/add/")
    options = manager.locator("#id_skill-options option").evaluate_all(
        "options => options.map(o => o.value)"
    )
    assert "browser-probe" in options
    manager.get_by_label("Behavior").select_option("deny")
    manager.get_by_label("Rule text").fill("Skill(nonexistent-skill)")
    manager.get_by_role("button", name="Save", exact=True).click()
    expect(manager.locator(".messagelist .warning")).to_contain_text(
        "No skill named 'nonexistent-skill' is installed"
    )
    expect(manager.locator("#result_list")).to_contain_text("⚠")
    screenshot(manager, "42-rule-saved-with-a-warning")
    # A skill manager tests typed calls, but does not read calls out of the audit.
    assert _status(manager, f"{base}/admin/skills_app/permissionrule/test/?call=Bash(ls)") == 200
    assert _status(manager, f"{base}/audit/invocations/{ids['invocation']}/") == 403

    auditor = tab("audrey").page
    auditor.goto(f"{base}/audit/invocations/{ids['invocation']}/")
    auditor.get_by_role("link", name="Test with today's rules").click()
    replay = auditor.locator("#tester-replay")
    expect(replay).to_contain_text("Replaying a call from the audit")
    expect(auditor.locator("#decided-then")).to_contain_text("allow")
    expect(auditor.get_by_label("Tool call")).to_have_value("Bash(git push origin main)")
    expect(auditor.get_by_label("Active skill")).to_have_value("release-notes")
    expect(auditor.locator("#tester-result .decision-word")).to_have_text(re.compile("ask|allow"))
    screenshot(auditor, "43-rule-tester-replay")

    chatter = tab("alice").page
    assert _status(chatter, f"{base}/admin/skills_app/permissionrule/test/?event=1") == 200
    expect(chatter.get_by_text("not authorized to access this page")).to_be_visible()


def test_the_comparison_shows_one_total_per_side_and_stops_running(tab, model, chat_server):
    base = chat_server.url
    model.enqueue(*(Reply.text(f"Answer {n}.") for n in range(3)))
    auditor = tab("audrey", width=1400).page
    auditor.goto(f"{base}/compare/")
    auditor.get_by_role("checkbox", name=re.compile("browser-probe")).check()
    auditor.get_by_role("textbox", name="Prompt").fill("Summarise version 2.4.0 in one line.")
    auditor.get_by_role("button", name="Run under every profile").click()
    columns = auditor.locator(".compare-column")
    expect(columns).to_have_count(3)
    expect(auditor.locator(".run-state").filter(has_text="Running…")).to_have_count(
        0, timeout=20_000
    )
    expect(auditor.locator("#compare-columns")).to_have_attribute("data-active", "false")
    for i in range(3):
        column = columns.nth(i)
        expect(column.locator(".run-state")).to_contain_text("Done")
        rows = column.locator("table.sizes tbody tr")
        totals = rows.filter(has=auditor.locator("td", has_text=re.compile("^total$")))
        expect(totals).to_have_count(1)
        cells = rows.evaluate_all(
            "rows => rows.map(r => [r.cells[0].textContent, Number(r.cells[1].textContent)])"
        )
        parts = [n for name, n in cells if name != "total"]
        assert [n for name, n in cells if name == "total"] == [sum(parts)]
        # The cache share is measured from the usage the API reported for the run.
        expect(column.locator(".cache-share")).to_contain_text("read from the cache (measured)")
    screenshot(auditor, "44-compare-one-total-per-side")

    manager = tab("mona").page
    assert _status(manager, f"{base}/compare/") == 200
    chatter = tab("alice").page
    chatter.goto(f"{base}/")
    assert "Compare" not in chatter.locator("nav.topnav").inner_text()
    assert _status(chatter, f"{base}/compare/") == 403


def test_a_comparison_as_the_source_design_explains_each_profiles_sources(tab, model, chat_server):
    """Issue 30: the page says what "as the source design" changes and which source each part
    of meta-message follows; read at desktop and phone widths."""
    base = chat_server.url
    model.enqueue(*(Reply.text(f"Answer {n}.") for n in range(3)))
    auditor = tab("audrey", width=1440, height=900).page
    auditor.goto(f"{base}/compare/")
    auditor.get_by_role("checkbox", name=re.compile("browser-probe")).check()
    auditor.get_by_role("radio", name="as the source design").check()
    auditor.get_by_role("textbox", name="Prompt").fill("Summarise version 2.4.0 in one line.")
    auditor.get_by_role("button", name="Run under every profile").click()
    expect(auditor.locator(".compare-column")).to_have_count(3)
    expect(auditor.locator("#compare-columns")).to_have_attribute(
        "data-active", "false", timeout=20_000
    )
    expect(auditor.locator("p", has_text="Skills offered:")).to_contain_text("as the source design")
    sources = auditor.locator("#meta-message-sources")
    expect(sources).to_be_visible()
    expect(sources.locator("tr", has_text="Acknowledgement")).to_contain_text("today's Claude Code")
    expect(auditor.locator("#tool-result-modes")).to_contain_text("max_tokens 8000")
    screenshot(auditor, "45-compare-as-the-source-design-desktop")
    # The tool-result column's request was s05's: its own tools, no Skillscope tools.
    tools = {
        tuple(t["name"] for t in r.get("tools", []))
        for r in model.requests
        if any(t.get("name") == "load_skill" for t in r.get("tools", []))
    }
    assert tools == {("bash", "read_file", "write_file", "edit_file", "load_skill")}
    phone = tab("audrey").page  # the same user's context: its viewport is set per page
    phone.set_viewport_size({"width": 390, "height": 844})
    phone.goto(auditor.url)
    expect(phone.locator("#meta-message-sources")).to_be_visible()
    overflow = phone.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the page is {overflow}px wider than the phone"
    screenshot(phone, "46-compare-as-the-source-design-phone")
    # The notes as a phone shows them: one screen from the meta-message sources table on.
    phone.locator("#meta-message-sources").scroll_into_view_if_needed()
    screenshot(phone, "47-compare-notes-phone", full_page=False)
