"""A Git skill source and the trigger gate in a real browser, as the skill manager (mona):
the source's page with its syncs and the Sync now button (the live server allows no local
repositories, so pressing it shows the refusal), a bad URL refused by the form, and the gate
turned on for the synced skill, at 1440 and 390 px."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from tests.browser.live_server import LiveServer
from tests.browser.pages import screenshot
from tests.browser.server_data import run_in_server

pytestmark = pytest.mark.browser

SKILL = "git-notes"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "T",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "T",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "HOME": "/nonexistent",
    "PATH": "/usr/bin:/bin",
}

_SYNC = """
from django.conf import settings
from pathlib import Path
from django.contrib.auth import get_user_model
from skills_app.models import SkillSource
from skills_app.registry import sources
settings.GIT_SOURCE_LOCAL_ROOTS = [Path({root!r})]
mona = get_user_model().objects.get(username="mona")
source = SkillSource.objects.create(name="team-notes", url={url!r}, branch="main", path="skills",
                                    created_by=mona)
record = sources.sync_source(source, trigger="command")
print(json.dumps({{"source": source.pk, "status": record.status, "message": record.message}}))
"""

_CLEAN_UP = """
from skills_app.models import SkillPackage, SkillSource
from skills_app.registry.uploads import delete_package
for package in SkillPackage.objects.filter(name={name!r}):
    delete_package(package)
SkillSource.objects.filter(name="team-notes").delete()
"""


@pytest.fixture
def synced(chat_server: LiveServer, tmp_path, request) -> Iterator[dict]:
    work, bare = tmp_path / "work", tmp_path / "remote.git"
    (work / "skills" / SKILL).mkdir(parents=True)
    (work / "skills" / SKILL / "SKILL.md").write_text(
        # Content of its own per test: reviewed versions stay in the audit, so a second run of
        # the same content would find it installed already.
        f"---\nname: {SKILL}\ndescription: Keeps meeting notes in notes.md.\n---\n"
        f"Append notes ({request.node.name}).\n"
    )
    for args in (
        ["init", "-q", "-b", "main", str(work)],
        ["-C", str(work), "add", "-A"],
        ["-C", str(work), "commit", "-q", "-m", "notes skill"],
        ["clone", "-q", "--bare", str(work), str(bare)],
    ):
        subprocess.run(["git", *args], env=GIT_ENV, check=True, capture_output=True)
    out = run_in_server(chat_server, _SYNC.format(root=str(tmp_path), url=f"file://{bare}"))
    result = json.loads(out.strip().splitlines()[-1])
    assert result["status"] == "ok", result["message"]
    try:
        yield result
    finally:
        run_in_server(chat_server, _CLEAN_UP.format(name=SKILL))


@pytest.mark.parametrize(
    ("width", "height", "label"), [(1440, 900, "desktop"), (390, 844, "phone")]
)
def test_a_git_source_and_the_trigger_gate(tab, chat_server, synced, width, height, label):
    page = tab("mona", width=width, height=height).page
    base = chat_server.url
    page.goto(f"{base}/admin/skills_app/skillsource/{synced['source']}/change/")
    expect(page.locator("body")).to_contain_text("new versions: git-notes v")
    # The syncs' history: the one the fixture ran, with its commit.
    expect(page.locator("#syncs-group")).to_contain_text("command")
    screenshot(page, f"git-source-{label}")
    page.locator("#sync-now").click()
    expect(page.locator(".messagelist")).to_contain_text(
        "local repositories are not allowed as sources"
    )

    page.goto(f"{base}/admin/skills_app/skillsource/add/")
    page.fill("#id_name", "bad")
    page.fill("#id_url", "ext::sh -c id")
    page.locator("input[name=_save]").click()
    expect(page.locator(".errornote, .errorlist").first).to_be_visible()
    expect(page.locator("body")).to_contain_text("ext:: transports are not allowed")

    page.goto(f"{base}/skills/triggers/")
    page.get_by_role("link", name=SKILL).click()
    page.locator("#gate-form input[name=trigger_gate]").check()
    page.locator("#gate-form button").click()
    expect(page.locator("#gate-verdict")).to_contain_text("the skill has no trigger set")
    screenshot(page, f"trigger-gate-{label}")
