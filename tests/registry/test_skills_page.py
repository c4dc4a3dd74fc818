"""The Skills page: every visible skill with its facts, and personal uploads."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from skills_app.models import SkillPackage
from skills_app.registry import uploads
from skills_app.registry.skills import skills_for_user
from tests.support.review_helpers import go_live
from tests.support.upload_helpers import make_zip, skill_md, snapshot, write_folder

pytestmark = pytest.mark.django_db

PAGE = "/skills/"


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def upload_zip(client: Client, files: dict, name: str = "skill.zip"):
    archive = SimpleUploadedFile(name, make_zip(files), content_type="application/zip")
    return client.post(reverse("skills-upload"), {"archive": archive})


def row_for(html: str, name: str, source: str) -> str:
    marker = f'data-skill="{name}" data-source="{source}"'
    start = html.index(marker)
    return html[start : html.index("</tr>", start)]


def test_it_sends_anonymous_visitors_to_the_login_page(client):
    response = client.get(PAGE)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_it_is_linked_from_the_header(alice):
    html = client_for(alice).get(reverse("skills-home")).content.decode()
    assert f'href="{PAGE}"' in html


def test_it_lists_bundled_skills_with_digest_and_invocability_for_skill_managers(skill_manager):
    html = client_for(skill_manager).get(PAGE).content.decode()
    bundled = [s for s in skills_for_user(skill_manager.pk).skills() if s.source == "bundled"]
    for spec in bundled:
        row = row_for(html, spec.name, "bundled")
        assert spec.digest[:12] in row
        assert ("<td>model" in row) == spec.model_invocable
        assert (f"user (<code>/{spec.name}</code>)" in row) == spec.user_invocable
    assert any(not s.model_invocable for s in bundled)  # the check above saw both cases


def test_it_shows_the_version_of_an_uploaded_skill_and_marks_what_it_shadows(
    settings, tmp_path, skill_manager
):
    write_folder(tmp_path / "dirs", {"clash/SKILL.md": skill_md("clash", body="Dirs.")})
    settings.SKILLS_DIRS = [tmp_path / "dirs"]
    make = lambda body: make_zip({"clash/SKILL.md": skill_md("clash", body=body)})  # noqa: E731
    go_live(uploads.install_archive(make("One."), "c.zip", user=None)[0])
    v2 = go_live(uploads.install_archive(make("Two."), "c.zip", user=None)[0])
    html = client_for(skill_manager).get(PAGE).content.decode()
    uploaded = row_for(html, "clash", "uploaded")
    assert "<td>2</td>" in uploaded
    assert v2.version.digest[:12] in uploaded
    assert "shadowed" not in uploaded
    assert "shadowed by uploaded" in row_for(html, "clash", "SKILLS_DIRS")


def test_it_shows_lint_warnings_of_a_skill(settings, tmp_path, skill_manager):
    text = "---\nname: noisy\ndescription: D.\ncolour: red\n---\nBody\n"
    write_folder(tmp_path / "dirs", {"noisy/SKILL.md": text})
    settings.SKILLS_DIRS = [tmp_path / "dirs"]
    row = row_for(client_for(skill_manager).get(PAGE).content.decode(), "noisy", "SKILLS_DIRS")
    assert "0 error(s), 1 warning(s)" in row
    assert "unknown frontmatter key `colour`" in row


def test_the_upload_form_takes_archives_and_folders_with_csrf(alice):
    html = client_for(alice).get(PAGE).content.decode()
    assert 'accept=".zip,.skill,application/zip"' in html
    assert "webkitdirectory" in html
    assert 'enctype="multipart/form-data"' in html
    assert "csrfmiddlewaretoken" in html


def test_an_upload_without_the_csrf_token_is_refused(alice):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    response = upload_zip(client, {"mine/SKILL.md": skill_md("mine")})
    assert response.status_code == 403
    assert not SkillPackage.objects.exists()


def test_a_user_uploads_a_personal_zip_and_sees_the_report(alice):
    text = "---\nname: mine\ndescription: D.\ncolour: red\n---\nBody\n"
    response = upload_zip(client_for(alice), {"mine/SKILL.md": text})
    html = response.content.decode()
    assert response.status_code == 200
    assert "Installed mine version 1 (personal" in html
    assert "unknown frontmatter key `colour`" in html
    package = SkillPackage.objects.get(name="mine")
    assert package.owner == alice
    assert 'data-skill="mine" data-access=' in html  # in the catalog, linked to its page
    assert skills_for_user(alice.pk).get("mine") is not None


def test_a_refused_upload_shows_the_lint_report_and_stores_nothing(alice):
    text = "---\nname: broken\ndescription: D.\nuser-invocable: maybe\n---\nBody\n"
    before = snapshot()
    response = upload_zip(client_for(alice), {"broken/SKILL.md": text})
    html = response.content.decode()
    assert response.status_code == 400
    assert "Upload refused:" in html
    assert "bool-value" in html and "broken/SKILL.md:4" in html
    assert snapshot() == before


def test_a_hostile_upload_shows_its_message(alice):
    response = upload_zip(client_for(alice), {"../evil/SKILL.md": skill_md("evil")})
    assert response.status_code == 400
    assert "contains &#x27;..&#x27;" in response.content.decode()


def test_a_user_uploads_a_folder_with_its_relative_paths(alice):
    files = [
        SimpleUploadedFile("SKILL.md", skill_md("folder-skill").encode()),
        SimpleUploadedFile("notes.md", b"notes"),
    ]
    paths = json.dumps(["folder-skill/SKILL.md", "folder-skill/refs/notes.md"])
    response = client_for(alice).post(reverse("skills-upload"), {"folder": files, "paths": paths})
    assert response.status_code == 200
    [package] = SkillPackage.objects.filter(name="folder-skill")
    folder = uploads.version_dir(package.active_version)
    assert (folder / "refs" / "notes.md").read_bytes() == b"notes"


def test_a_folder_upload_without_its_paths_asks_for_a_zip(alice):
    response = client_for(alice).post(
        reverse("skills-upload"), {"folder": [SimpleUploadedFile("SKILL.md", b"x")]}
    )
    assert response.status_code == 400
    assert "zip the folder and upload the zip instead" in response.content.decode()


def test_an_empty_form_says_what_to_choose(alice):
    response = client_for(alice).post(reverse("skills-upload"), {})
    assert response.status_code == 400
    assert "choose either a .zip/.skill file or a folder" in response.content.decode()


def test_personal_skills_of_others_never_show(alice, bob):
    upload_zip(client_for(alice), {"alices/SKILL.md": skill_md("alices")})
    html = client_for(bob).get(PAGE).content.decode()
    assert "alices" not in html


def test_with_personal_skills_off_there_is_no_form_and_uploads_are_refused(settings, alice):
    settings.ALLOW_PERSONAL_SKILLS = False
    client = client_for(alice)
    assert "webkitdirectory" not in client.get(PAGE).content.decode()
    response = upload_zip(client, {"mine/SKILL.md": skill_md("mine")})
    assert response.status_code == 403
    assert not SkillPackage.objects.exists()


def test_the_owner_disables_and_enables_a_personal_skill(alice):
    client = client_for(alice)
    upload_zip(client, {"mine/SKILL.md": skill_md("mine")})
    package = SkillPackage.objects.get(name="mine")
    url = reverse("skills-package-enable", args=[package.pk])
    assert client.post(url, {"enabled": "0"}).status_code == 302
    assert skills_for_user(alice.pk).get("mine") is None
    client.post(url, {"enabled": "1"})
    assert skills_for_user(alice.pk).get("mine") is not None


def test_the_owner_deletes_a_personal_skill(alice):
    client = client_for(alice)
    upload_zip(client, {"mine/SKILL.md": skill_md("mine")})
    package = SkillPackage.objects.get(name="mine")
    response = client.post(reverse("skills-package-delete", args=[package.pk]))
    assert "mine was deleted" in response.content.decode()
    assert not SkillPackage.objects.exists()


@pytest.mark.parametrize("route", ["skills-package-enable", "skills-package-delete"])
def test_another_user_cannot_touch_a_personal_skill(alice, bob, route):
    upload_zip(client_for(alice), {"mine/SKILL.md": skill_md("mine")})
    package = SkillPackage.objects.get(name="mine")
    response = client_for(bob).post(reverse(route, args=[package.pk]), {"enabled": "0"})
    assert response.status_code == 404
    package.refresh_from_db()
    assert package.enabled


def test_organisation_packages_cannot_be_changed_from_this_page(alice):
    [result] = uploads.install_archive(
        make_zip({"org/SKILL.md": skill_md("org")}), "o.zip", user=None
    )
    url = reverse("skills-package-enable", args=[result.package.pk])
    assert client_for(alice).post(url, {"enabled": "0"}).status_code == 404
