"""The Rules page: who may see and change rules, the admin's validation in words, audit rows
before and after, and the tester's answer."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse

from skills_app.models import AuditEvent, PermissionRule

pytestmark = pytest.mark.django_db

PAGE = reverse("rules-page")
ADD = reverse("rule-add")


def _client(user, **kwargs) -> Client:
    client = Client(**kwargs)
    client.force_login(user)
    return client


def _data(**overrides) -> dict[str, str]:
    data = {"behavior": "deny", "rule_text": "Bash(git push *)", "skill": "", "enabled": "on"}
    data.update({"position": "0", "note": "", **overrides})
    return data


def test_a_chatter_can_neither_see_nor_change_rules(alice):
    rule = PermissionRule.objects.create(behavior="deny", rule_text="Bash(rm *)")
    client = _client(alice)

    assert client.get(PAGE).status_code == 403
    assert client.post(ADD, _data()).status_code == 403
    assert client.get(reverse("rule-edit", args=[rule.pk])).status_code == 403
    assert client.post(reverse("rule-edit", args=[rule.pk]), _data()).status_code == 403
    assert client.post(reverse("rule-delete", args=[rule.pk])).status_code == 403
    assert list(PermissionRule.objects.values_list("rule_text", flat=True)) == ["Bash(rm *)"]
    assert not AuditEvent.objects.filter(action__startswith="rule.").exists()
    assert ">Rules<" not in client.get(reverse("skills-page")).content.decode()


def test_an_auditor_reads_the_rules_and_the_tester_but_gets_no_forms(auditor):
    PermissionRule.objects.create(behavior="deny", rule_text="Bash(rm *)")
    client = _client(auditor)

    page = client.get(PAGE).content.decode()

    assert "Bash(rm *)" in page
    assert 'id="tester"' in page
    assert 'id="add-rule"' not in page
    assert "Delete" not in page
    assert client.post(ADD, _data()).status_code == 403
    assert not PermissionRule.objects.filter(rule_text="Bash(git push *)").exists()


def test_rules_are_listed_under_everyone_each_group_and_each_person(skill_manager, bob):
    team = Group.objects.create(name="payments")
    PermissionRule.objects.create(behavior="allow", rule_text="Read(./docs/**)")
    scoped = PermissionRule.objects.create(behavior="ask", rule_text="Bash(make *)")
    scoped.applies_to_groups.add(team)
    scoped.applies_to_users.add(bob)

    audiences = _client(skill_manager).get(PAGE).context["audiences"]

    listed = {a.label: [row.rule.rule_text for row in a.rules] for a in audiences}
    assert listed == {
        "Everyone": ["Read(./docs/**)"],
        "Group payments": ["Bash(make *)"],
        "User bob": ["Bash(make *)"],
    }


def test_adding_a_rule_redirects_records_its_author_and_an_audit_row(skill_manager):
    response = _client(skill_manager).post(ADD, _data(note="no pushes"))

    rule = PermissionRule.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"{PAGE}#rule-{rule.pk}"
    assert (rule.behavior, rule.rule_text, rule.author) == (
        "deny",
        "Bash(git push *)",
        skill_manager,
    )
    event = AuditEvent.objects.get(action__startswith="rule.")
    assert event.action == AuditEvent.RULE_ADDED
    assert event.actor == skill_manager
    assert event.target == f"rule #{rule.pk}: deny Bash(git push *)"
    assert event.detail["after"]["note"] == "no pushes"
    assert "before" not in event.detail


def test_a_post_without_the_csrf_token_is_refused(skill_manager):
    client = _client(skill_manager, enforce_csrf_checks=True)

    assert client.post(ADD, _data()).status_code == 403
    assert not PermissionRule.objects.exists()


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("Bash(git push", "Unbalanced parentheses in &#x27;Bash(git push&#x27;: add the closing"),
        ("bash(ls *)", "Unknown tool &#x27;bash&#x27;. Did you mean Bash?"),
        # The form's "can never match" check: an allow spanning two commands.
        ("Bash(ls * &amp;&amp; rm *)", "Write one allow rule per command instead"),
    ],
)
def test_a_rule_the_form_refuses_is_explained_and_nothing_is_saved(skill_manager, text, words):
    raw = text.replace("&amp;", "&")

    response = _client(skill_manager).post(ADD, _data(behavior="allow", rule_text=raw))

    assert response.status_code == 400
    assert words in response.content.decode()
    assert not PermissionRule.objects.exists()
    assert not AuditEvent.objects.filter(action__startswith="rule.").exists()


def test_a_rule_naming_an_unknown_skill_is_saved_with_the_warning_said(skill_manager):
    response = _client(skill_manager).post(
        ADD, _data(behavior="allow", rule_text="Skill(no-such-skill)"), follow=True
    )

    page = response.content.decode()
    assert PermissionRule.objects.filter(rule_text="Skill(no-such-skill)").exists()
    assert "Saved with a warning:" in page
    assert "no-such-skill" in page


def test_editing_records_the_rule_before_and_after(skill_manager, bob):
    rule = PermissionRule.objects.create(behavior="deny", rule_text="Bash(git push *)")
    edit = reverse("rule-edit", args=[rule.pk])
    client = _client(skill_manager)
    assert 'value="Bash(git push *)"' in client.get(edit).content.decode()

    response = client.post(
        edit, _data(behavior="ask", applies_to_users=[str(bob.pk)], note="ask first")
    )

    assert response.status_code == 302
    event = AuditEvent.objects.get(action=AuditEvent.RULE_CHANGED)
    assert event.actor == skill_manager
    assert event.detail["changed"] == ["behavior", "note", "applies_to_users"]
    assert event.detail["before"]["behavior"] == "deny"
    assert event.detail["before"]["applies_to_users"] == []
    assert event.detail["after"]["behavior"] == "ask"
    assert event.detail["after"]["applies_to_users"] == ["bob"]


def test_deleting_records_what_the_rule_was(skill_manager):
    rule = PermissionRule.objects.create(behavior="allow", rule_text="Read(./docs/**)")

    response = _client(skill_manager).post(reverse("rule-delete", args=[rule.pk]))

    assert response.status_code == 302
    assert not PermissionRule.objects.exists()
    event = AuditEvent.objects.get(action__startswith="rule.")
    assert event.action == AuditEvent.RULE_DELETED
    assert event.detail["before"]["rule_text"] == "Read(./docs/**)"


def test_a_change_in_the_admin_is_recorded_the_same_way(admin_user):
    rule = PermissionRule.objects.create(behavior="deny", rule_text="Bash(git push *)")
    client = _client(admin_user)

    client.post(
        reverse("admin:skills_app_permissionrule_change", args=[rule.pk]), _data(behavior="ask")
    )
    client.post(reverse("admin:skills_app_permissionrule_delete", args=[rule.pk]), {"post": "yes"})

    changed, deleted = AuditEvent.objects.filter(action__startswith="rule.").order_by("pk")
    assert changed.action == AuditEvent.RULE_CHANGED
    assert (changed.detail["before"]["behavior"], changed.detail["after"]["behavior"]) == (
        "deny",
        "ask",
    )
    assert deleted.action == AuditEvent.RULE_DELETED
    assert deleted.actor == admin_user


def test_the_tester_answers_with_the_decision_and_the_rule_that_decided(auditor):
    rule = PermissionRule.objects.create(behavior="deny", rule_text="Bash(git push *)")

    response = _client(auditor).get(PAGE, {"call": "Bash(git push origin main)"})

    result = response.context["result"]
    assert result.decision.behavior == "deny"
    assert result.decision.rule.rule_id == rule.pk
    assert f'<a href="#rule-{rule.pk}">' in response.content.decode()


def test_the_tester_explains_a_call_it_cannot_read_and_lists_examples(auditor):
    response = _client(auditor).get(PAGE, {"call": "git push"})

    page = response.content.decode()
    assert response.context["result"] is None
    assert "Write the call as Tool(argument), e.g. Bash(git status)." in page
    assert f"{PAGE}?call=Skill%28pdf%29#tester" in page
