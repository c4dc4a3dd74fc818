"""`manage.py skills submit|approve|reject|activate|rollback NAME [--version V] --as USER`: the
review from the command line takes the same steps as the review page, under the same rules,
and leaves the same trail (only marked as taken from the command line)."""

from __future__ import annotations

from collections.abc import Callable
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import transaction
from django.urls import reverse

from skills_app.accounts import roles
from skills_app.models import SkillPackage, SkillReview, SkillVersion
from skills_app.registry import review
from tests.security.helpers import client_of
from tests.support.review_helpers import GREET_SCRIPT, greet_files, upload_draft

pytestmark = pytest.mark.django_db


@pytest.fixture
def rita(django_user_model):
    """A second skill manager, who reviews what mona uploads."""
    user = django_user_model.objects.create_user("rita", password="rita-pass-123")
    roles.grant(user, roles.get_role("skill-manager"))
    return user


def skills(*args: str) -> str:
    out = StringIO()
    call_command("skills", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


class _Undo(Exception):
    pass


def _outcome(take: Callable[[], Any], package: SkillPackage) -> dict[str, Any]:
    """Take a step, note what it left (the new trail rows, each version's state, the active
    version), then undo it all, so the other entrance can take the same step from the same
    state."""
    before = set(SkillReview.objects.values_list("pk", flat=True))
    seen: dict[str, Any] = {}
    try:
        with transaction.atomic():
            take()
            rows = SkillReview.objects.exclude(pk__in=before).order_by("pk")
            seen["rows"] = [
                {
                    field.name: getattr(row, field.attname)
                    for field in SkillReview._meta.concrete_fields
                    if field.name not in ("id", "created_at")
                }
                for row in rows
            ]
            seen["versions"] = dict(package.versions.values_list("number", "review_status"))
            package.refresh_from_db()
            seen["active"] = package.active_version.number if package.active_version else None
            raise _Undo
    except _Undo:
        pass
    package.refresh_from_db()
    return seen


def _same_as_the_page(page: Callable[[], Any], command: Callable[[], Any], package) -> None:
    """The step through the page and through the command leave the same rows and states; the
    command's rows say they came from the command line."""
    by_page = _outcome(page, package)
    by_command = _outcome(command, package)
    assert by_page["rows"], "the page took no step"
    assert [r.pop("origin") for r in by_page["rows"]] == [""] * len(by_page["rows"])
    assert [r.pop("origin") for r in by_command["rows"]] == ["cli"] * len(by_command["rows"])
    assert by_command == by_page


def _post(user, version: SkillVersion, **data: str) -> Callable[[], Any]:
    def take() -> None:
        response = client_of(user).post(reverse("skill-review", args=[version.pk]), data)
        assert response.status_code == 302, response.content.decode()[:2000]

    return take


def test_each_step_leaves_the_same_trail_and_states_as_the_review_page(skill_manager, rita):
    v1 = upload_draft(skill_manager)
    package = v1.package

    _same_as_the_page(
        _post(skill_manager, v1, action="submit", comment="ready"),
        lambda: skills("submit", "org-greet", "--comment", "ready", "--as", "mona"),
        package,
    )
    skills("submit", "org-greet", "--as", "mona")

    digest = review.manifest_of(v1).digest
    _same_as_the_page(
        _post(rita, v1, action="approve", manifest=digest, comment="read it all"),
        lambda: skills(
            "approve", "org-greet", "--manifest", digest, "--comment", "read it all", "--as", "rita"
        ),
        package,
    )
    skills("approve", "org-greet", "--manifest", digest, "--as", "rita")

    _same_as_the_page(
        _post(rita, v1, action="activate"),
        lambda: skills("activate", "org-greet", "--as", "rita"),
        package,
    )
    skills("activate", "org-greet", "--as", "rita")

    v2 = upload_draft(skill_manager, greet_files(script=GREET_SCRIPT.replace("fine", "grand")))
    skills("submit", "org-greet", "--version", "2", "--as", "mona")
    _same_as_the_page(
        _post(rita, v2, action="request_changes", comment="Say it in French too."),
        lambda: skills("reject", "org-greet", "--reason", "Say it in French too.", "--as", "rita"),
        package,
    )
    skills("reject", "org-greet", "--reason", "Say it in French too.", "--as", "rita")
    skills("submit", "org-greet", "--as", "mona")
    skills("approve", "org-greet", "--manifest", review.manifest_of(v2).digest, "--as", "rita")
    skills("activate", "org-greet", "--as", "rita")

    _same_as_the_page(
        _post(skill_manager, v1, action="activate"),
        lambda: skills("rollback", "org-greet", "--as", "mona"),
        package,
    )
    skills("rollback", "org-greet", "--version", "1", "--as", "mona")
    package.refresh_from_db()
    assert package.active_version == v1
    trail = [(s.version_number, s.action, s.origin) for s in review.trail(package)]
    assert trail[-2:] == [(2, "activated", "cli"), (1, "rolled_back", "cli")]


def test_approving_needs_the_manifest_read_and_prints_it(skill_manager, rita):
    version = upload_draft(skill_manager)
    skills("submit", "org-greet", "--as", "mona")
    out = StringIO()
    with pytest.raises(CommandError, match="approving needs --manifest DIGEST") as refused:
        call_command("skills", "approve", "org-greet", "--as", "rita", stdout=out)
    digest = review.manifest_of(version).digest
    assert digest in str(refused.value) and reverse("skill-review", args=[version.pk]) in str(
        refused.value
    )
    listed = out.getvalue()
    assert "[consented] command the skill asks the model to run" in listed and digest in listed
    with pytest.raises(CommandError, match="not the one you were shown"):
        skills("approve", "org-greet", "--manifest", "0" * 64, "--as", "rita")
    version.refresh_from_db()
    assert version.review_status == SkillVersion.SUBMITTED


def test_the_pages_rules_hold_on_the_command_line(settings, skill_manager, rita, alice):
    upload_draft(skill_manager)
    with pytest.raises(CommandError, match="Only skill managers submit"):
        skills("submit", "org-greet", "--as", "alice")
    skills("submit", "org-greet", "--as", "mona")
    digest = review.manifest_of(SkillVersion.objects.get()).digest
    with pytest.raises(CommandError, match="reviewer permission"):
        skills("approve", "org-greet", "--manifest", digest, "--as", "alice")
    settings.SKILL_REVIEWER_MUST_DIFFER = True
    with pytest.raises(CommandError, match="someone other than the person who uploaded"):
        skills("approve", "org-greet", "--manifest", digest, "--as", "mona")
    with pytest.raises(CommandError, match="goes live for others only after"):
        skills("activate", "org-greet", "--as", "mona")
    skills("approve", "org-greet", "--manifest", digest, "--as", "rita")
    with pytest.raises(CommandError, match="Only skill managers make"):
        skills("activate", "org-greet", "--as", "alice")
    assert SkillPackage.objects.get().active_version is None


def test_a_version_that_cannot_be_shown_whole_is_refused_on_the_command_line_too(
    monkeypatch, skill_manager, rita
):
    from skills_app.core.review import pages

    version = upload_draft(skill_manager)
    skills("submit", "org-greet", "--as", "mona")
    monkeypatch.setattr(pages, "MAX_PAGES", 0)
    digest = review.manifest_of(version).digest
    for args in (("--manifest", digest), ()):
        with pytest.raises(CommandError, match="cannot be shown whole"):
            skills("approve", "org-greet", *args, "--as", "rita")
    version.refresh_from_db()
    assert version.review_status == SkillVersion.SUBMITTED


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("submit", "nope", "--as", "mona"), "no organisation skill named 'nope'; organisation "),
        (("submit", "org-greet", "--version", "7", "--as", "mona"), "has no version 7; its "),
        (("submit", "org-greet", "--as", "nobody"), "no user named 'nobody'"),
        (("rollback", "org-greet", "--as", "mona"), "no approved version before the active"),
        (("reject", "org-greet", "--reason", "x", "--as", "mona"), "is not waiting for a review"),
    ],
)
def test_clear_errors_end_the_command_with_a_failing_status(skill_manager, capsys, args, words):
    upload_draft(skill_manager)
    with pytest.raises(SystemExit) as ended:
        # As `manage.py` runs it: the error on stderr, and the exit status.
        from django.core.management import ManagementUtility

        ManagementUtility(["manage.py", "skills", *args]).execute()
    assert ended.value.code not in (0, None)
    assert words in capsys.readouterr().err


def test_a_deactivated_account_takes_no_step(skill_manager):
    upload_draft(skill_manager)
    skill_manager.is_active = False
    skill_manager.save()
    with pytest.raises(CommandError, match="deactivated"):
        skills("submit", "org-greet", "--as", "mona")


def test_activate_refuses_to_go_back_and_rollback_to_go_forward(skill_manager, rita):
    v1 = upload_draft(skill_manager)
    skills("submit", "org-greet", "--as", "mona")
    skills("approve", "org-greet", "--manifest", review.manifest_of(v1).digest, "--as", "rita")
    with pytest.raises(CommandError, match="nothing is active; use `skills activate`"):
        skills("rollback", "org-greet", "--version", "1", "--as", "mona")
    out = skills("activate", "org-greet", "--as", "mona")
    assert "org-greet v1 is now the active version for everyone" in out
    v2 = upload_draft(skill_manager, greet_files(script="print('two')\n"))
    skills("submit", "org-greet", "--as", "mona")
    skills("approve", "org-greet", "--manifest", review.manifest_of(v2).digest, "--as", "rita")
    skills("activate", "org-greet", "--as", "mona")
    with pytest.raises(CommandError, match="is a rollback; run `skills rollback org-greet"):
        skills("activate", "org-greet", "--version", "1", "--as", "mona")
