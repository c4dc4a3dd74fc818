"""Issue 23: the rule pages answer every role that may open them (an auditor got a 500).

The auditor may view rules but not change them, so the admin builds the form without its
fields and shows them read-only; the form must not assume a field is there.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from skills_app.accounts import roles
from skills_app.models import PermissionRule
from tests.security.helpers import client_of


@pytest.fixture
def rule(admin_user) -> PermissionRule:
    return PermissionRule.objects.create(
        behavior="deny", rule_text="Bash(rm *)", skill="release-notes", note="no removals"
    )


def _with_role(django_user_model: Any, username: str, slug: str) -> Any:
    user = django_user_model.objects.create_user(username, password=f"{username}-pass-123")
    roles.grant(user, roles.get_role(slug))
    return user


@pytest.mark.django_db
@pytest.mark.parametrize("slug", ["auditor", "skill-manager", "administrator"])
def test_every_role_that_may_view_rules_opens_the_change_page(django_user_model, rule, slug):
    user = _with_role(django_user_model, "rita", slug)
    client = client_of(user)
    page = client.get(reverse("admin:skills_app_permissionrule_change", args=[rule.pk]))
    assert page.status_code == 200
    assert b"Bash(rm *)" in page.content and b"release-notes" in page.content
    listing = client.get(reverse("admin:skills_app_permissionrule_changelist"))
    assert listing.status_code == 200 and b"Bash(rm *)" in listing.content


@pytest.mark.django_db
def test_the_auditor_sees_the_rule_read_only_and_cannot_change_it(django_user_model, rule):
    auditor = _with_role(django_user_model, "rita", "auditor")
    client = client_of(auditor)
    url = reverse("admin:skills_app_permissionrule_change", args=[rule.pk])
    page = client.get(url)
    assert b'name="rule_text"' not in page.content  # no input: shown, not editable
    posted = client.post(url, {"behavior": "allow", "rule_text": "Bash(*)", "skill": ""})
    assert posted.status_code == 403
    rule.refresh_from_db()
    assert (rule.behavior, rule.rule_text) == ("deny", "Bash(rm *)")
    assert client.get(reverse("admin:skills_app_permissionrule_add")).status_code == 403


@pytest.mark.django_db
def test_a_skill_manager_still_gets_the_skill_suggestions_and_can_save(django_user_model, rule):
    manager = _with_role(django_user_model, "mo", "skill-manager")
    client = client_of(manager)
    url = reverse("admin:skills_app_permissionrule_change", args=[rule.pk])
    page = client.get(url)
    assert b'list="id_skill-options"' in page.content  # the datalist widget is in place
    posted = client.post(
        url,
        {
            "behavior": "ask",
            "rule_text": "Bash(rm *)",
            "skill": "/release-notes",
            "enabled": "on",
            "position": "0",
            "note": "ask instead",
        },
    )
    assert posted.status_code == 302
    rule.refresh_from_db()
    assert (rule.behavior, rule.skill) == ("ask", "release-notes")
