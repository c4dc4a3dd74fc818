"""The Skills page in Chromium: a personal folder upload, then the skill in the `/` menu."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.pages import screenshot

pytestmark = pytest.mark.browser


def test_a_folder_upload_becomes_a_personal_skill_in_the_slash_menu_of_its_owner_only(
    tab, tmp_path
):
    folder = tmp_path / "folder-pick"
    (folder / "references").mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: folder-pick\ndescription: Picks a folder for the browser test.\n"
        "colour: green\n---\nSee [notes](references/notes.md).\n"
    )
    (folder / "references" / "notes.md").write_text("notes\n")

    chat = tab("alice")
    page = chat.page
    page.goto(f"{chat.base_url}/skills/")
    expect(page.get_by_role("heading", name="Skills", exact=True)).to_be_visible()
    page.get_by_label("Folder").set_input_files(folder)
    page.get_by_role("button", name="Upload").click()

    report = page.locator("#upload-report")
    expect(report).to_contain_text("Installed folder-pick version 1 (personal")
    expect(report).to_contain_text("unknown frontmatter key `colour`")
    row = page.locator('#skill-catalog tr[data-skill="folder-pick"]')
    expect(row).to_contain_text("personal")
    expect(page.locator("#personal")).to_be_visible()
    screenshot(page, "skills-page-folder-upload")

    chat.new_conversation()
    chat.message_box.fill("/folder")
    expect(page.locator(".slash-menu")).to_contain_text("folder-pick")

    other = tab("audrey").page
    other.goto(f"{chat.base_url}/skills/")
    expect(other.locator("#skill-catalog")).to_be_visible()
    expect(other.locator('tr[data-skill="folder-pick"]')).to_have_count(0)
