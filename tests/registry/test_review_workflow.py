"""The review on the pages people use: upload for everyone from the Skills page, the review page
(the whole package, a diff of every file, lint, trigger figures, the manifest), approve, request
changes, roll back, the skill page for everyone, the `/` menu link, the audit's decisions and
steps, and what the migration makes of installs that were live before reviews existed."""

from __future__ import annotations

import importlib
import json

import pytest
from django.apps import apps
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from skills_app.models import (
    Conversation,
    PermissionDecision,
    PermissionRule,
    SkillPackage,
    SkillReview,
    SkillVersion,
)
from skills_app.registry import review
from skills_app.registry.consents import consents_for
from skills_app.registry.skills import skills_for_user
from tests.security.helpers import client_of
from tests.support.review_helpers import (
    GREET_MARKER,
    GREET_SCRIPT,
    GREET_SKILL_MD,
    approve,
    greet_files,
    publish,
    upload_draft,
)
from tests.support.upload_helpers import make_zip

pytestmark = pytest.mark.django_db


def _zip(files) -> SimpleUploadedFile:
    data = make_zip({f.path: f.data for f in files})
    return SimpleUploadedFile("org-greet.zip", data, content_type="application/zip")


def test_a_skill_manager_uploads_for_everyone_from_the_skills_page_and_submits(skill_manager):
    page = client_of(skill_manager).get(reverse("skills-page")).content.decode()
    assert 'id="org-upload-form"' in page and 'id="review-queue"' in page
    bad = greet_files()
    bad[0] = type(bad[0])(
        bad[0].path,
        bad[0].data.replace(
            b'${CLAUDE_SKILL_DIR}/scripts/greet.py "$ARGUMENTS"', b"scripts/greet.py"
        ),
    )
    client = client_of(skill_manager)
    response = client.post(reverse("skills-org-upload"), {"archive": _zip(bad), "submit": "1"})
    version = SkillVersion.objects.get(package__name="org-greet")
    # Redirected to the version's page: a reload reads it again, nothing is uploaded twice.
    assert response.status_code == 302
    assert response["Location"] == reverse("skill-review", args=[version.pk]) + "#review"
    html = client.get(response["Location"]).content.decode()
    assert version.review_status == SkillVersion.SUBMITTED
    assert [s.action for s in version.reviews.order_by("pk")] == ["uploaded", "submitted"]
    notice = html[
        html.index('<div class="notice notice-success" role="status" id="review-notice">') :
    ]
    notice = notice[: notice.index("</div>")]
    assert "Installed org-greet version 1 (organisation-wide" in notice
    assert "Submitted for review." in notice and "Lint found 1 thing to look at" in notice
    # Said once: the notice is gone on the next visit.
    assert "Submitted for review." not in client.get(response["Location"]).content.decode()
    # Lint shows at once: the script is run by a path the workspace does not have.
    assert (
        'data-rule="script-path"' in html
        and "<code>${CLAUDE_SKILL_DIR}/scripts/greet.py</code>" in html
    )
    assert skills_for_user(skill_manager.pk).get("org-greet") is None  # not live yet


def test_an_upload_of_several_skills_redirects_to_the_review_queue_with_a_notice_each(
    skill_manager,
):
    hello_md = GREET_SKILL_MD.replace("name: org-greet", "name: org-hello")
    files = [
        *greet_files(),
        *[type(f)(f.path.replace("org-greet/", "org-hello/"), f.data) for f in greet_files()],
    ]
    # Several skills come as a plugin: <plugin>/skills/<name>/SKILL.md.
    files = [type(f)(f"team/skills/{f.path}", f.data) for f in files]
    files[2] = type(files[2])(files[2].path, hello_md.encode())
    client = client_of(skill_manager)
    response = client.post(reverse("skills-org-upload"), {"archive": _zip(files)})
    assert response.status_code == 302
    assert response["Location"] == reverse("skills-page") + "#review-queue"
    html = client.get(response["Location"]).content.decode()
    notice = html[
        html.index('<div class="notice notice-success" role="status" id="org-upload-report">') :
    ]
    notice = notice[: notice.index("</div>")]
    assert "Installed team:org-greet version 1" in notice
    assert "Installed team:org-hello version 1" in notice


def test_an_ordinary_user_cannot_upload_for_everyone(alice):
    response = client_of(alice).post(reverse("skills-org-upload"), {"archive": _zip(greet_files())})
    assert response.status_code == 404
    assert not SkillPackage.objects.exists()
    assert (
        'id="org-upload-form"' not in client_of(alice).get(reverse("skills-page")).content.decode()
    )


def test_the_review_page_shows_the_whole_package_and_a_diff_of_the_script(skill_manager):
    v1 = publish(skill_manager)
    script = GREET_SCRIPT.replace("Have a fine day.", "Welcome aboard.")
    files = [
        *greet_files(script=script),
        type(greet_files()[0])("org-greet/assets/logo.bin", b"\0\1\2"),
    ]
    v2 = upload_draft(skill_manager, files)
    html = client_of(skill_manager).get(reverse("skill-review", args=[v2.pk])).content.decode()
    # Every file: text shown whole, a binary by size and digest.
    assert GREET_MARKER in html and "import sys" in html
    assert 'data-path="assets/logo.bin"' in html and "3 bytes" in html and "Binary" in html
    # The script's diff against the active version.
    diff = html[html.index('class="file-diff" open data-path="scripts/greet.py"') :]
    diff = diff[: diff.index("</details>")]
    assert "diff-del" in diff and "Have a fine day." in diff and "Welcome aboard." in diff
    assert f"Compared with</dt><dd>v{v1.number} (the active version)" in html
    # The manifest, exactly and in words, with its digest; trigger tests; the decision forms.
    assert "python3 ${CLAUDE_SKILL_DIR}/scripts/greet.py &quot;$ARGUMENTS&quot;" in html
    assert "Runs the skill&#x27;s own Python script" in html
    assert review.manifest_of(v2).digest in html
    assert 'id="trigger-none"' in html
    assert 'id="submit-form"' in html and 'id="approve-form"' not in html


def test_approve_request_changes_resubmit_and_roll_back_through_the_page(skill_manager, alice):
    v1 = publish(skill_manager)
    v2 = upload_draft(skill_manager, greet_files(script=GREET_SCRIPT.replace("fine", "grand")))
    client = client_of(skill_manager)
    url = reverse("skill-review", args=[v2.pk])
    client.post(url, {"action": "submit"})
    refused = client.post(url, {"action": "request_changes", "comment": ""})
    assert refused.status_code == 400 and "Say what should change" in refused.content.decode()
    client.post(url, {"action": "request_changes", "comment": "Say hello in French too."})
    v2.refresh_from_db()
    assert v2.review_status == SkillVersion.CHANGES_REQUESTED
    client.post(url, {"action": "submit"})
    digest = review.manifest_of(v2).digest
    done = client.post(url, {"action": "approve", "manifest": digest, "activate": "1"})
    assert done.status_code == 302 and done["Location"] == url  # a reload takes no step again
    assert "It is now the active version for everyone." in client.get(url).content.decode()
    assert skills_for_user(alice.pk).get("org-greet").digest == v2.digest
    # A rollback to the earlier approved version is immediate.
    back = client.post(reverse("skill-review", args=[v1.pk]), {"action": "activate"})
    assert back.status_code == 302
    assert skills_for_user(alice.pk).get("org-greet").digest == v1.digest
    steps = list(SkillReview.objects.filter(version__package=v1.package).order_by("pk"))
    assert [(s.version_number, s.action) for s in steps][-7:] == [
        (2, "uploaded"),
        (2, "submitted"),
        (2, "changes_requested"),
        (2, "submitted"),
        (2, "approved"),
        (2, "activated"),
        (1, "rolled_back"),
    ]
    assert all(s.digest == (v1 if s.version_number == 1 else v2).digest for s in steps)
    assert steps[-5].comment == "Say hello in French too."
    trail = client.get(url).content.decode()
    assert "Say hello in French too." in trail and "rolled back to" in trail


def test_personal_skills_need_no_review(alice):
    from skills_app.registry import uploads

    [result] = uploads.install_files(greet_files(), user=alice, personal=True)
    assert result.version.review_status == SkillVersion.PERSONAL
    assert not result.version.reviews.exists()
    assert skills_for_user(alice.pk).get("org-greet").source == "personal"
    with pytest.raises(review.ReviewError, match="need no review"):
        review.submit(result.version, alice)


def test_the_skill_page_tells_everyone_who_published_and_reviewed_it_and_what_it_may_run(
    settings, skill_manager, alice, django_user_model
):
    from skills_app.accounts import roles

    settings.SKILL_REVIEWER_MUST_DIFFER = True
    rita = django_user_model.objects.create_user("rita")
    roles.grant(rita, roles.get_role("skill-manager"))
    version = upload_draft(skill_manager)
    approve(version, rita, submitter=skill_manager)
    review.activate(version, rita)
    html = client_of(alice).get(reverse("skill-detail", args=["org-greet"])).content.decode()
    assert "mona (for the organisation)" in html
    assert "rita on " in html and "v1" in html
    assert "Runs the skill&#x27;s own Python script <code>scripts/greet.py</code>" in html
    assert "runs without asking you (reviewed)" in html
    assert "type /org-greet, or the model asks you before it loads it" in html
    assert GREET_MARKER not in html and 'id="review-link"' not in html
    PermissionRule.objects.create(behavior="deny", rule_text="Skill(org-greet)")
    blocked = client_of(alice).get(reverse("skill-detail", args=["org-greet"])).content.decode()
    assert "You cannot use it: the rule Skill(org-greet) blocks it." in blocked
    manager = client_of(skill_manager).get(reverse("skill-detail", args=["org-greet"]))
    assert 'id="review-link"' in manager.content.decode()


def test_a_personal_skill_page_is_its_owners_alone(alice, bob):
    from skills_app.registry import uploads

    uploads.install_files(greet_files(), user=alice, personal=True)
    assert client_of(alice).get(reverse("skill-detail", args=["org-greet"])).status_code == 200
    assert client_of(bob).get(reverse("skill-detail", args=["org-greet"])).status_code == 404


def test_the_slash_menu_links_each_skill_to_its_page(alice):
    conversation = Conversation.objects.create(owner=alice, title="t")
    page = client_of(alice).get(reverse("conversation", args=[conversation.pk])).content.decode()
    data = page[page.index('id="skills-data"') :]
    data = json.loads(data[data.index(">") + 1 : data.index("</script>")])
    entry = next(s for s in data if s["name"] == "text-stats")
    assert entry["url"] == reverse("skill-detail", args=["text-stats"])


def test_the_audit_filters_decisions_by_decision_rule_and_reviewer(skill_manager, auditor, alice):
    version = publish(skill_manager)
    step = version.reviews.get(action="approved")
    conversation = Conversation.objects.create(owner=alice, title="t")
    common = {"conversation": conversation, "tool": "Bash", "skill": "org-greet"}
    PermissionDecision.objects.create(
        **common, call_text="Bash(python3 greet.py Ada)", decision="allow", source="review",
        rule_text="Bash(python3 greet.py \"$ARGUMENTS\")", reason="allowed by the review of org-greet v1 by mona",
        review=step, reviewer=skill_manager, reviewer_name="mona",
    )  # fmt: skip
    PermissionDecision.objects.create(
        **common, call_text="Bash(rm -rf out)", decision="deny", source="admin",
        rule_text="Bash(rm *)", rule_id=7, reason='deny rule "Bash(rm *)" (admin #7)',
    )  # fmt: skip
    PermissionDecision.objects.create(
        **common, call_text="Bash(echo x)", decision="refused", source="hidden",
        reason="this command quotes the skill's instructions", reviewer_name="mona",
    )  # fmt: skip
    client = client_of(auditor)
    url = reverse("audit-decisions")

    def shown(query: str) -> set[str]:
        html = client.get(url + query).content.decode()
        return {d for d in ("allow", "deny", "refused") if f'data-decision="{d}"' in html}

    assert shown("") == {"allow", "deny", "refused"}
    assert shown("?decision=refused") == {"refused"}
    assert shown("?rule=rm") == {"deny"}
    assert shown("?reviewer=mona") == {"allow", "refused"}
    assert shown("?source=review") == {"allow"}
    html = client.get(url + "?reviewer=mona&source=review").content.decode()
    assert "allowed by the review of org-greet v1 by mona" in html
    steps = client.get(reverse("audit-reviews") + "?skill=org-greet").content.decode()
    assert steps.count('data-action="approved"') == 1 and step.digest[:12] in steps
    assert client_of(alice).get(url).status_code == 403


def test_the_migration_marks_live_versions_approved_by_migration_without_consent(skill_manager):
    version = upload_draft(skill_manager)
    package = version.package
    package.active_version = version
    package.save()
    SkillVersion.objects.filter(pk=version.pk).update(review_status="draft")
    migration = importlib.import_module("skills_app.migrations.0022_reviews_of_live_skills")
    migration.mark(apps, None)
    version.refresh_from_db()
    assert version.review_status == SkillVersion.APPROVED
    step = version.reviews.get(action=SkillReview.APPROVED_BY_MIGRATION)
    assert (
        step.actor is None
        and step.digest == version.digest
        and "nobody has reviewed" in step.comment
    )
    spec = skills_for_user(None).get("org-greet")
    assert spec is not None and consents_for([spec]) == {}  # live as before, no one's consent


def test_the_review_pages_every_file_and_then_the_files_removed_since_the_compared_version(
    skill_manager,
):
    from skills_app.registry.uploads import UploadFile

    old_notes = "OLD-NOTES-77: the notes this version drops\n"
    publish(
        skill_manager, [*greet_files(), UploadFile("org-greet/notes/old.md", old_notes.encode())]
    )
    fillers = [UploadFile(f"org-greet/a/f{n:03d}.txt", b"filler\n") for n in range(198)]
    v2 = upload_draft(skill_manager, [*greet_files(), *fillers])
    url = reverse("skill-review", args=[v2.pk])
    first = client_of(skill_manager).get(url).content.decode()
    assert "Files 1–200 of 200 · page 1 of 2 · 1 removed since v1" in first
    assert "OLD-NOTES-77" not in first and 'href="?page=2#files"' in first
    assert "Page 2</a>: files removed since v1 (<code>notes/old.md</code>)" in first
    second = client_of(skill_manager).get(url, {"page": "2"}).content.decode()
    assert "Files removed since v1 (1) · page 2 of 2" in second
    removed = second[second.index('data-path="notes/old.md" data-status="removed"') :]
    assert "-OLD-NOTES-77" in removed[: removed.index("</details>")]
    assert 'class="package-file"' not in second  # no file of v2 on this page
    # Anything that is not a page number shows the first page; past the last, the last.
    assert "page 1 of 2" in client_of(skill_manager).get(url, {"page": "x"}).content.decode()
    assert "page 2 of 2" in client_of(skill_manager).get(url, {"page": "99"}).content.decode()


def test_a_version_whose_files_are_gone_from_storage_says_so_and_cannot_be_approved(
    skill_manager,
):
    import shutil

    from skills_app.registry.uploads import version_dir

    version = upload_draft(skill_manager)
    review.submit(version, skill_manager)
    shutil.rmtree(version_dir(version))
    html = client_of(skill_manager).get(reverse("skill-review", args=[version.pk])).content.decode()
    assert 'id="digest-problem"' in html and "no longer match" in html
    assert "No file of this version can be read." in html and "removed since" not in html
    assert ">Approve</button>" not in html
