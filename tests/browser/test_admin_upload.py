"""An administrator uploads skills through the real admin form; a user then finds them in `/`."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.live_server import LiveServer
from tests.browser.pages import screenshot
from tests.browser.server_data import publish

pytestmark = pytest.mark.browser

ADMIN = ("browser-admin", "browser-admin-pass-123")
ZIPPED = "admin-zipped-notes"
FOLDER = "admin-folder-notes"

# Run in the live server's environment, like its own setup script.
_CREATE_ADMIN = """
from django.contrib.auth.models import User
if not User.objects.filter(username={name!r}).exists():
    User.objects.create_superuser({name!r}, password={password!r})
"""
# Leaves the shared live server as the other browser tests expect it.
_CLEAN_UP = """
from skills_app.models import PermissionRule, SkillPackage
from skills_app.registry.uploads import delete_package
for package in SkillPackage.objects.filter(name__in={names!r}):
    delete_package(package)
PermissionRule.objects.filter(author__username={admin!r}).delete()
"""


def _in_server(server: LiveServer, script: str) -> None:
    server.host().run(script)


def _skill_md(name: str, extra: str = "") -> str:
    # Only people start these skills, so they never reach the catalog other tests' model sees.
    return (
        f"---\nname: {name}\n"
        "description: Turns meeting notes into a list of decisions and owners.\n"
        f"disable-model-invocation: true\n{extra}---\n\n# Notes\n\nList each decision.\n"
    )


def _zip(path: Path, files: dict[str, str]) -> Path:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    path.write_bytes(buffer.getvalue())
    return path


@pytest.fixture
def admin_page(browser: Browser, chat_server: LiveServer) -> Iterator[Page]:
    """A tab logged in at /admin/ as a superuser; its skills and rules are removed afterwards."""
    _in_server(chat_server, _CREATE_ADMIN.format(name=ADMIN[0], password=ADMIN[1]))
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    try:
        page.goto(f"{chat_server.url}/admin/")
        page.get_by_label("Username").fill(ADMIN[0])
        page.get_by_label("Password").fill(ADMIN[1])
        page.get_by_role("button", name="Log in").click()
        expect(page.get_by_role("heading", name="Site administration")).to_be_visible()
        yield page
    finally:
        context.close()
        _in_server(chat_server, _CLEAN_UP.format(names=[ZIPPED, FOLDER], admin=ADMIN[0]))


def test_an_admin_uploads_a_zip_and_a_folder_and_a_user_finds_them_in_the_slash_menu(
    admin_page, tab, tmp_path, chat_server
):
    page = admin_page
    page.get_by_role("link", name="Skill packages").click()
    page.get_by_role("link", name="Upload skill").click()
    expect(page.get_by_role("heading", name="Upload skill")).to_be_visible()

    # A skill with a lint error is refused, with the report, and nothing is installed.
    broken = _zip(
        tmp_path / "broken.zip",
        {f"{ZIPPED}/SKILL.md": _skill_md(ZIPPED, "user-invocable: maybe\n")},
    )
    page.get_by_label("Archive").set_input_files(broken)
    page.get_by_role("button", name="Upload").click()
    expect(page.get_by_role("alert")).to_contain_text("Upload rejected")
    expect(page.get_by_role("alert")).to_contain_text("Nothing was stored.")
    report = page.locator(".upload-rejected table")
    expect(report.locator(".problem-rule")).to_have_text(["bool-value"])
    expect(report.locator(".problem-file")).to_have_text([f"{ZIPPED}/SKILL.md:5"])
    screenshot(page, "20-admin-upload-rejected")

    # The fixed zip installs, with its warning listed.
    good = _zip(tmp_path / "good.zip", {f"{ZIPPED}/SKILL.md": _skill_md(ZIPPED, "team: docs\n")})
    page.get_by_label("Archive").set_input_files(good)
    page.get_by_role("button", name="Upload").click()
    expect(page.locator(".messagelist .success")).to_contain_text(f"Installed {ZIPPED} version 1")
    installed = page.get_by_role("region", name=f"Installed {ZIPPED}")
    expect(installed).to_contain_text("Installed with 1 lint warning")
    expect(installed.locator(".problem-rule")).to_have_text(["unknown-key"])
    screenshot(page, "21-admin-upload-installed")

    # A folder picked with the folder input keeps its layout (the page script sends the paths).
    folder = tmp_path / FOLDER
    (folder / "references").mkdir(parents=True)
    (folder / "SKILL.md").write_text(_skill_md(FOLDER))
    (folder / "references" / "format.md").write_text("# Format\n")
    page.get_by_label("Folder").set_input_files(folder)
    page.get_by_role("button", name="Upload").click()
    expect(page.locator(".messagelist .success")).to_contain_text(f"Installed {FOLDER} version 1")

    page.get_by_role("link", name="Skill packages").first.click()
    expect(page.locator("#result_list")).to_contain_text(ZIPPED)
    expect(page.locator("#result_list")).to_contain_text(FOLDER)

    # Drafts until a skill manager reviews them (tests/browser/test_review_flow.py does it on
    # the pages); here the reviews are taken as the review page would take them.
    publish(chat_server, ZIPPED, FOLDER)

    chat = tab("alice")
    chat.new_conversation()
    chat.message_box.click()
    chat.message_box.press("/")
    menu = chat.page.get_by_role("listbox", name="Skills")
    expect(menu).to_be_visible()
    names = menu.get_by_role("option").locator(".option-name")
    expect(names.filter(has_text=f"/{ZIPPED}")).to_have_count(1)
    expect(names.filter(has_text=f"/{FOLDER}")).to_have_count(1)
    screenshot(chat.page, "22-uploaded-skill-in-slash-menu")


def test_an_admin_compares_versions_rolls_back_and_tests_a_rule(admin_page, tmp_path, chat_server):
    page = admin_page
    upload_url = page.url.replace("/admin/", "/admin/skills_app/skillpackage/upload/")
    for number, step in enumerate(
        ("List each decision.", "List each decision <and> its owner."), 1
    ):
        text = _skill_md(ZIPPED).replace("List each decision.", step)
        page.goto(upload_url)
        page.get_by_label("Archive").set_input_files(
            _zip(tmp_path / f"v{number}.zip", {f"{ZIPPED}/SKILL.md": text})
        )
        page.get_by_role("button", name="Upload").click()
        expect(page.locator(".messagelist .success")).to_contain_text(f"version {number}")
        publish(chat_server, ZIPPED)  # reviewed and made active, as on its review page

    page.get_by_role("link", name=ZIPPED).click()
    versions = page.locator("#versions")
    expect(versions.locator(".active-mark")).to_have_count(1)
    expect(versions.get_by_role("button", name="Activate v1")).to_be_visible()
    screenshot(page, "23-admin-skill-versions")

    page.get_by_role("link", name="Diff SKILL.md").click()
    diff = page.get_by_label("SKILL.md diff")
    expect(diff.locator(".diff-del")).to_have_text(["-List each decision."])
    expect(diff.locator(".diff-add")).to_have_text(["+List each decision <and> its owner."])
    screenshot(page, "24-admin-skill-diff")

    page.go_back()
    page.get_by_role("button", name="Activate v1").click()
    expect(page.locator(".messagelist .success")).to_contain_text("now uses version 1")
    expect(page.locator("#versions").get_by_role("button", name="Activate v2")).to_be_visible()

    # A rule with a typo is refused inline; the fixed one decides in the tester.
    page.goto(page.url.split("/admin/")[0] + "/admin/skills_app/permissionrule/add/")
    page.get_by_label("Behavior").select_option("deny")
    page.get_by_label("Rule text").fill("Bash(git push *")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator(".errorlist")).to_contain_text("Unbalanced parentheses")
    page.get_by_label("Rule text").fill("Bash(git push *)")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator(".messagelist .success")).to_be_visible()
    screenshot(page, "25a-admin-rules-with-tester")

    page.get_by_label("Tool call").fill("Bash(git push origin main)")
    page.get_by_role("button", name="Decide").click()
    result = page.locator("#tester-result")
    expect(result.locator(".decision-word")).to_have_text("deny")
    expect(result).to_contain_text('deny rule "Bash(git push *)"')
    screenshot(page, "25b-admin-rule-tester")
