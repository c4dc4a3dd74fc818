"""Four eyes once there are two: with SKILL_REVIEWER_MUST_DIFFER unset, the approver of an
organisation version must be someone other than its uploader and submitter whenever more than
one active account may review; true always, false never (docs/review.md)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.urls import reverse

from skills_app.accounts import roles
from skills_app.models import SkillVersion
from skills_app.registry import review
from tests.security.helpers import client_of
from tests.support.review_helpers import GREET_SCRIPT, greet_files, upload_draft
from webapp.env import env_bool_or_auto

pytestmark = pytest.mark.django_db


def _submitted(user, n: int) -> SkillVersion:
    """A new version of org-greet (its script says `n`), uploaded and submitted by `user`."""
    version = upload_draft(user, greet_files(script=GREET_SCRIPT.replace("fine", f"fine {n}")))
    review.submit(version, user)
    return version


def _approve(version: SkillVersion, user) -> str:
    """Approve; the refusal's words when refused."""
    try:
        review.approve(version, user, manifest_digest=review.manifest_of(version).digest)
    except review.ReviewError as exc:
        return exc.message
    return ""


def test_unset_the_approver_must_differ_as_soon_as_a_second_active_reviewer_exists(
    settings, skill_manager, django_user_model
):
    settings.SKILL_REVIEWER_MUST_DIFFER = None  # as .env.example leaves it
    # Alone, mona approves what she uploaded: a server with one skill manager works.
    assert _approve(_submitted(skill_manager, 1), skill_manager) == ""
    rita = django_user_model.objects.create_user("rita")
    roles.grant(rita, roles.get_role("skill-manager"))
    second = _submitted(skill_manager, 2)
    refusal = _approve(second, skill_manager)
    assert "someone other than the person who uploaded or submitted" in refusal
    assert "more than one person can review" in refusal
    assert _approve(second, rita) == ""
    # A submitter is an author too: rita submits what mona uploaded.
    third = upload_draft(skill_manager, greet_files(script="print(3)\n"))
    review.submit(third, rita)
    assert "someone other than" in _approve(third, rita)
    assert "someone other than" in _approve(third, skill_manager)
    # Deactivated, rita no longer counts; nor does an account that cannot review.
    rita.is_active = False
    rita.save()
    django_user_model.objects.create_user("alice2")
    assert _approve(third, skill_manager) == ""


def test_a_superuser_counts_as_a_second_reviewer(settings, skill_manager, admin_user):
    settings.SKILL_REVIEWER_MUST_DIFFER = None
    version = _submitted(skill_manager, 1)
    assert "someone other than" in _approve(version, skill_manager)
    assert _approve(version, admin_user) == ""


def test_set_false_self_review_is_allowed_whoever_else_may_review(
    settings, skill_manager, admin_user
):
    settings.SKILL_REVIEWER_MUST_DIFFER = False
    assert review.reviewer_must_differ() is False
    assert _approve(_submitted(skill_manager, 1), skill_manager) == ""


def test_the_review_page_says_why_the_author_may_not_approve(settings, skill_manager, admin_user):
    settings.SKILL_REVIEWER_MUST_DIFFER = None
    version = _submitted(skill_manager, 1)
    url = reverse("skill-review", args=[version.pk])
    html = client_of(skill_manager).get(url).content.decode()
    form = html[html.index('id="approve-form"') :]
    form = form[: form.index("</form>")]
    assert ">Approve</button>" not in form and "someone other than" in form
    client_of(skill_manager).post(
        url, {"action": "approve", "manifest": review.manifest_of(version).digest}
    )
    version.refresh_from_db()
    assert version.review_status == SkillVersion.SUBMITTED


@pytest.mark.parametrize(
    ("raw", "value"),
    [(None, None), ("", None), ("auto", None), (" AUTO ", None), ("true", True), ("off", False)],
)
def test_the_setting_reads_unset_empty_or_auto_as_the_default_rule(monkeypatch, raw, value):
    if raw is None:
        monkeypatch.delenv("SKILL_REVIEWER_MUST_DIFFER", raising=False)
    else:
        monkeypatch.setenv("SKILL_REVIEWER_MUST_DIFFER", raw)
    assert env_bool_or_auto("SKILL_REVIEWER_MUST_DIFFER") is value


def test_a_setting_that_is_not_a_boolean_stops_start_up_saying_what_to_write(monkeypatch):
    monkeypatch.setenv("SKILL_REVIEWER_MUST_DIFFER", "maybe")
    with pytest.raises(ImproperlyConfigured, match="leave it empty .or write auto."):
        env_bool_or_auto("SKILL_REVIEWER_MUST_DIFFER")
