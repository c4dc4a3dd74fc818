"""The SkillPackage admin: upload page, lint report, versions, activate, diff, actions; read-only
admins for versions and the audit records."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.contrib.auth.models import Permission
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from skills_app.models import Conversation, SkillInvocation, SkillPackage, SkillVersion
from skills_app.registry import review
from skills_app.registry.uploads import storage_root
from tests.support.review_helpers import approve, reviewer_user

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:skills_app_skillpackage_changelist")
UPLOAD = reverse("admin:skills_app_skillpackage_upload")


def _client(user, **kwargs) -> Client:
    client = Client(**kwargs)
    client.force_login(user)
    return client


def skill_md(name: str, description: str = "Fills PDF forms from a CSV.", extra: str = "") -> str:
    return (
        f"---\nname: {name}\ndescription: {description}\n{extra}---\n\n# {name}\n\nSteps go here.\n"
    )


def zip_bytes(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return buffer.getvalue()


def _upload(client: Client, files: dict[str, str], filename: str = "pdf-forms.zip", **extra):
    archive = SimpleUploadedFile(filename, zip_bytes(files), content_type="application/zip")
    return client.post(UPLOAD, {"archive": archive, **extra})


def _stored_files() -> list[Path]:
    root = storage_root()
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def _install(client: Client, name: str, body: str) -> SkillPackage:
    """Upload through the admin, then review the draft and make it active (as a manager would)."""
    text = f"---\nname: {name}\ndescription: A skill for the tests.\n---\n\n{body}\n"
    response = _upload(client, {f"{name}/SKILL.md": text}, filename=f"{name}.zip")
    assert response.status_code == 200, response.content
    package = SkillPackage.objects.get(name=name)
    version = package.versions.order_by("-number").first()
    assert version.review_status == SkillVersion.DRAFT
    reviewer = reviewer_user()
    approve(version, reviewer)
    review.activate(version, reviewer)
    package.refresh_from_db()
    return package


@pytest.fixture
def root(admin_user) -> Client:
    return _client(admin_user)


# ---------------------------------------------------------------- access


def test_it_shows_the_list_and_the_upload_page_to_a_superuser(root):
    listing = root.get(CHANGELIST)
    assert listing.status_code == 200
    assert f'href="{UPLOAD}"' in listing.content.decode()
    assert "Upload skill" in listing.content.decode()
    page = root.get(UPLOAD)
    assert page.status_code == 200
    html = page.content.decode()
    assert 'accept=".zip,.skill"' in html
    assert "webkitdirectory" in html
    assert 'enctype="multipart/form-data"' in html


def test_it_sends_the_add_button_to_the_upload_page(root):
    response = root.get(reverse("admin:skills_app_skillpackage_add"))
    assert response.status_code == 302
    assert response["Location"] == UPLOAD


@pytest.mark.parametrize("url", [CHANGELIST, UPLOAD])
def test_it_sends_an_ordinary_user_to_the_admin_login(alice, url):
    response = _client(alice).get(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


def test_it_does_not_let_an_ordinary_user_upload(alice):
    response = _upload(_client(alice), {"pdf-forms/SKILL.md": skill_md("pdf-forms")})
    assert response.status_code == 302
    assert not SkillPackage.objects.exists()
    assert _stored_files() == []


def test_it_refuses_an_upload_without_a_csrf_token(admin_user):
    client = _client(admin_user, enforce_csrf_checks=True)
    response = _upload(client, {"pdf-forms/SKILL.md": skill_md("pdf-forms")})
    assert response.status_code == 403
    assert not SkillPackage.objects.exists()


# ---------------------------------------------------------------- upload


def test_it_installs_a_zipped_skill_folder_and_says_which_version(root, admin_user):
    response = _upload(root, {"pdf-forms/SKILL.md": skill_md("pdf-forms")})

    assert response.status_code == 200
    package = SkillPackage.objects.get(name="pdf-forms")
    assert package.active_version is None  # a draft until it is reviewed
    version = package.versions.get()
    assert (version.number, version.uploaded_by, package.owner) == (1, admin_user, None)
    assert version.review_status == SkillVersion.DRAFT
    html = response.content.decode()
    assert "pdf-forms</a>: version 1" in html
    assert version.digest[:12] in html
    assert "No lint warnings." in html
    [message] = [str(m) for m in response.context["messages"]]
    assert message == (
        f"Installed pdf-forms version 1 (organisation-wide, digest {version.digest[:12]}); "
        "stored as a draft (nothing is live yet): it goes live for others after its review."
    )
    entry = LogEntry.objects.get(object_id=str(package.pk))
    assert (entry.action_flag, entry.user) == (CHANGE, admin_user)
    assert "Uploaded version 1" in entry.get_change_message()
    assert _stored_files(), "the skill's files should be in storage"


def test_it_lists_lint_warnings_of_an_installed_skill(root):
    text = skill_md("pdf-forms", extra="owner_team: docs\n")
    response = _upload(root, {"pdf-forms/SKILL.md": text})

    html = response.content.decode()
    assert "Installed with 1 lint warning:" in html
    assert '<td class="problem-rule">unknown-key</td>' in html
    assert "unknown frontmatter key `owner_team`" in html
    assert SkillVersion.objects.get().lint[0]["rule"] == "unknown-key"


def test_it_rejects_a_skill_with_lint_errors_shows_the_report_and_stores_nothing(root):
    text = skill_md("pdf-forms", extra="user-invocable: maybe\n")
    response = _upload(root, {"pdf-forms/SKILL.md": text})

    assert response.status_code == 200
    html = response.content.decode()
    assert "Upload rejected: " in html
    assert "lint error" in html
    assert "Nothing was stored." in html
    assert '<td class="severity-error">error</td>' in html
    assert '<td class="problem-rule">bool-value</td>' in html
    assert "pdf-forms/SKILL.md" in html
    assert "is not a boolean" in html
    assert not SkillPackage.objects.exists()
    assert not SkillVersion.objects.exists()
    assert _stored_files() == []
    assert not LogEntry.objects.exists()


def test_it_rejects_a_hostile_archive_with_the_reason(root):
    response = _upload(root, {"../evil/SKILL.md": skill_md("evil")})

    html = response.content.decode()
    assert "Upload rejected: " in html
    assert "contains &#x27;..&#x27;, which would write outside the skill folder" in html
    assert not SkillPackage.objects.exists()
    assert _stored_files() == []


def test_it_says_so_when_the_same_content_is_uploaded_again(root):
    files = {"pdf-forms/SKILL.md": skill_md("pdf-forms")}
    _upload(root, files)

    again = _upload(root, files)

    [message] = [str(m) for m in again.context["messages"]]
    assert "already installed as version 1" in message
    assert "nothing changed" in message
    assert SkillVersion.objects.count() == 1
    assert LogEntry.objects.count() == 1


def test_it_installs_a_folder_with_the_paths_the_page_script_sends(root):
    files = [
        SimpleUploadedFile("SKILL.md", skill_md("csv-tools").encode()),
        SimpleUploadedFile("guide.md", b"# Guide\n"),
    ]
    response = root.post(
        UPLOAD,
        {"folder": files, "folder_paths": "csv-tools/SKILL.md\ncsv-tools/references/guide.md"},
    )

    assert response.status_code == 200
    assert "csv-tools</a>: version 1" in response.content.decode()
    version = SkillVersion.objects.get(package__name="csv-tools")
    stored = storage_root() / version.storage_path
    assert (stored / "references" / "guide.md").read_text() == "# Guide\n"


def test_it_asks_for_the_paths_when_a_folder_arrives_without_them(root):
    files = [SimpleUploadedFile("SKILL.md", skill_md("csv-tools").encode())]
    response = root.post(UPLOAD, {"folder": files})

    assert "upload the folder as a .zip instead" in response.content.decode()
    assert not SkillPackage.objects.exists()


def test_it_asks_for_something_to_upload(root):
    response = root.post(UPLOAD, {})
    assert "Choose a .zip or .skill archive, or a skill folder, to upload." in (
        response.content.decode()
    )


def test_it_refuses_an_archive_and_a_folder_at_once(root):
    archive = SimpleUploadedFile("a.zip", zip_bytes({"a/SKILL.md": skill_md("a")}))
    folder = [SimpleUploadedFile("SKILL.md", skill_md("b").encode())]
    response = root.post(
        UPLOAD, {"archive": archive, "folder": folder, "folder_paths": "b/SKILL.md"}
    )
    assert "Choose either an archive or a folder, not both." in response.content.decode()
    assert not SkillPackage.objects.exists()


def test_it_refuses_an_archive_over_the_size_limit_before_reading_it(root, settings):
    settings.UPLOAD_MAX_TOTAL_BYTES = 2048
    response = _upload(root, {"big/SKILL.md": skill_md("big"), "big/blob.bin": "x" * 4096})
    # Stored uncompressed by zipfile's default, so the archive itself is over 2 KB.
    assert "(UPLOAD_MAX_TOTAL_BYTES)" in response.content.decode()
    assert not SkillPackage.objects.exists()


def test_it_installs_a_personal_skill_for_the_uploader(root, admin_user):
    _upload(root, {"notes/SKILL.md": skill_md("notes")}, filename="notes.zip", personal="on")
    assert SkillPackage.objects.get(name="notes").owner == admin_user
    assert "personal: root" in root.get(CHANGELIST).content.decode()


# ---------------------------------------------------------------- versions, activate, diff


@pytest.fixture
def two_versions(root) -> SkillPackage:
    _install(root, "report", "Write the report.\nKeep it short.")
    return _install(root, "report", "Write the report.\nKeep it under <b>one</b> page.")


def test_it_lists_versions_with_activate_buttons_on_the_change_page(root, two_versions):
    v1, v2 = two_versions.versions.order_by("number")
    html = root.get(reverse("admin:skills_app_skillpackage_change", args=[two_versions.pk]))
    html = html.content.decode()

    assert two_versions.active_version == v2
    assert f'id="version-{v1.pk}"' in html
    assert f'id="version-{v2.pk}"' in html
    activate = reverse("admin:skills_app_skillpackage_activate", args=[two_versions.pk, v1.pk])
    assert f'action="{activate}"' in html
    assert "Activate v1" in html
    assert "Activate v2" not in html
    assert v1.digest[:12] in html and v2.digest[:12] in html
    assert html.count("csrfmiddlewaretoken") >= 2


def test_it_rolls_back_to_an_older_version_and_logs_it(root, two_versions, admin_user):
    v1 = two_versions.versions.get(number=1)
    url = reverse("admin:skills_app_skillpackage_activate", args=[two_versions.pk, v1.pk])

    response = root.post(url)

    assert response.status_code == 302
    two_versions.refresh_from_db()
    assert two_versions.active_version == v1
    entry = LogEntry.objects.filter(object_id=str(two_versions.pk)).latest("action_time")
    assert entry.get_change_message().startswith("Activated version 1")


def test_it_activates_only_by_post_with_a_csrf_token(admin_user, two_versions):
    v1 = two_versions.versions.get(number=1)
    url = reverse("admin:skills_app_skillpackage_activate", args=[two_versions.pk, v1.pk])

    # GET shows the trigger tests and the button (issue 17); it never activates.
    page = _client(admin_user).get(url)
    assert page.status_code == 200 and b'value="Activate v1"' in page.content
    assert _client(admin_user, enforce_csrf_checks=True).post(url).status_code == 403
    two_versions.refresh_from_db()
    assert two_versions.active_version.number == 2


def test_it_does_not_activate_a_version_of_another_package(root, two_versions):
    other = _install(root, "other", "Other things.")
    url = reverse(
        "admin:skills_app_skillpackage_activate", args=[two_versions.pk, other.active_version.pk]
    )
    assert root.post(url).status_code == 404


def test_it_does_not_let_an_ordinary_user_activate(alice, two_versions):
    v1 = two_versions.versions.get(number=1)
    url = reverse("admin:skills_app_skillpackage_activate", args=[two_versions.pk, v1.pk])
    assert _client(alice).post(url).status_code == 302
    two_versions.refresh_from_db()
    assert two_versions.active_version.number == 2


def test_it_shows_the_skill_md_diff_coloured_and_escaped(root, two_versions):
    url = reverse("admin:skills_app_skillpackage_diff", args=[two_versions.pk])

    html = root.get(url).content.decode()

    assert '<span class="diff-del">-Keep it short.</span>' in html
    assert '<span class="diff-add">+Keep it under &lt;b&gt;one&lt;/b&gt; page.</span>' in html
    assert '<span class="diff-same"> Write the report.</span>' in html
    assert "<b>one</b>" not in html


def test_it_diffs_the_versions_chosen(root, two_versions):
    v1, v2 = two_versions.versions.order_by("number")
    url = reverse("admin:skills_app_skillpackage_diff", args=[two_versions.pk])

    html = root.get(url, {"a": v2.pk, "b": v1.pk}).content.decode()

    assert '<span class="diff-add">+Keep it short.</span>' in html
    assert "v2 → v1" in html


# ---------------------------------------------------------------- list actions


def _action(client: Client, action: str, *packages: SkillPackage):
    return client.post(
        CHANGELIST,
        {"action": action, "_selected_action": [p.pk for p in packages]},
    )


def test_it_disables_and_enables_skills_from_the_list(root, two_versions):
    _action(root, "disable_packages", two_versions)
    two_versions.refresh_from_db()
    assert not two_versions.enabled
    assert LogEntry.objects.filter(change_message="Disabled the skill.").count() == 1

    _action(root, "enable_packages", two_versions)
    two_versions.refresh_from_db()
    assert two_versions.enabled


def test_it_deletes_an_unused_personal_skill_with_its_files(root, admin_user):
    _upload(root, {"mine/SKILL.md": skill_md("mine")}, personal="on")
    package = SkillPackage.objects.get(name="mine")
    _action(root, "delete_packages", package)

    assert not SkillPackage.objects.exists()
    assert _stored_files() == []
    assert LogEntry.objects.filter(action_flag=DELETION, object_repr="mine").exists()


def test_it_disables_instead_of_deleting_a_reviewed_skill(root, two_versions):
    _action(root, "delete_packages", two_versions)

    two_versions.refresh_from_db()
    assert not two_versions.enabled
    assert SkillVersion.objects.filter(package=two_versions).count() == 2
    assert two_versions.versions.get(number=1).reviews.exists()


def test_it_disables_instead_of_deleting_a_skill_a_conversation_used(root, two_versions, alice):
    conversation = Conversation.objects.create(owner=alice)
    SkillInvocation.objects.create(
        conversation=conversation,
        skill="report",
        caller="user",
        decision="allowed",
        version=two_versions.active_version,
    )

    _action(root, "delete_packages", two_versions)

    two_versions.refresh_from_db()
    assert not two_versions.enabled
    assert SkillVersion.objects.filter(package=two_versions).count() == 2


# ---------------------------------------------------------------- read-only records


def test_it_shows_versions_read_only(root, two_versions):
    version = two_versions.active_version
    change = reverse("admin:skills_app_skillversion_change", args=[version.pk])

    assert root.get(reverse("admin:skills_app_skillversion_changelist")).status_code == 200
    assert root.get(reverse("admin:skills_app_skillversion_add")).status_code == 403
    page = root.get(change)
    assert page.status_code == 200
    assert 'name="_save"' not in page.content.decode()
    assert root.post(change, {"number": 9}).status_code == 403
    delete = reverse("admin:skills_app_skillversion_delete", args=[version.pk])
    assert root.post(delete, {"post": "yes"}).status_code == 403
    assert SkillVersion.objects.get(pk=version.pk).number == 2


@pytest.fixture
def invocation(alice) -> SkillInvocation:
    conversation = Conversation.objects.create(owner=alice, title="Audit me")
    return SkillInvocation.objects.create(
        conversation=conversation,
        skill="report",
        caller="model",
        decision="allowed",
        decided_by='allow rule "Skill(report)" (admin #1)',
        injected_text="HIDDEN-INJECTED-3f9a",
    )


def test_it_shows_injected_text_to_those_who_may_inspect_it(root, invocation):
    url = reverse("admin:skills_app_skillinvocation_change", args=[invocation.pk])
    listing = root.get(reverse("admin:skills_app_skillinvocation_changelist"))
    assert listing.status_code == 200
    assert "alice" in listing.content.decode()
    assert "HIDDEN-INJECTED-3f9a" in root.get(url).content.decode()


def test_it_hides_injected_text_from_staff_without_the_inspect_permission(
    django_user_model, invocation
):
    staff = django_user_model.objects.create_user("sam", password="sam-pass-123", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_skillinvocation"))
    url = reverse("admin:skills_app_skillinvocation_change", args=[invocation.pk])

    page = _client(staff).get(url)

    assert page.status_code == 200
    assert "allowed" in page.content.decode()
    assert "HIDDEN-INJECTED-3f9a" not in page.content.decode()


@pytest.mark.parametrize("model", ["run", "approval", "skillinvocation"])
def test_it_offers_no_add_for_audit_records(root, model):
    assert root.get(reverse(f"admin:skills_app_{model}_changelist")).status_code == 200
    assert root.get(reverse(f"admin:skills_app_{model}_add")).status_code == 403
