"""The PermissionRule admin: evaluation order, inline validation, author and log, and the rule tester."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.test import Client
from django.urls import reverse

from skills_app.models import PermissionRule
from skills_app.permissions.approvals import admin_rules

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:skills_app_permissionrule_changelist")
ADD = reverse("admin:skills_app_permissionrule_add")
TESTER = reverse("admin:skills_app_permissionrule_test")


def _client(user, **kwargs) -> Client:
    client = Client(**kwargs)
    client.force_login(user)
    return client


def _rule(behavior: str, text: str, **fields) -> PermissionRule:
    return PermissionRule.objects.create(behavior=behavior, rule_text=text, **fields)


def _form_data(**overrides) -> dict[str, str]:
    data = {
        "behavior": "allow",
        "rule_text": "Bash(git diff *)",
        "skill": "",
        "enabled": "on",
        "position": "0",
        "note": "",
    }
    data.update(overrides)
    return data


def _test(client: Client, call: str, skill: str = ""):
    return client.get(TESTER, {"call": call, "skill": skill})


# ---------------------------------------------------------------- access


def test_it_shows_the_rules_and_the_tester_to_a_superuser(admin_user):
    client = _client(admin_user)
    assert client.get(CHANGELIST).status_code == 200
    assert client.get(ADD).status_code == 200
    assert client.get(TESTER).status_code == 200


@pytest.mark.parametrize("url", [CHANGELIST, ADD, TESTER])
def test_it_sends_an_ordinary_user_to_the_admin_login(alice, url):
    response = _client(alice).get(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


def test_it_sends_an_anonymous_visitor_to_the_admin_login():
    response = Client().get(TESTER, {"call": "Bash(ls)"})
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


def test_it_refuses_a_rule_posted_without_a_csrf_token(admin_user):
    client = _client(admin_user, enforce_csrf_checks=True)
    response = client.post(ADD, _form_data(behavior="deny", rule_text="Bash(rm *)"))
    assert response.status_code == 403
    assert not PermissionRule.objects.exists()


# ---------------------------------------------------------------- the list


def test_it_lists_rules_in_the_order_they_are_evaluated(admin_user):
    allow_first = _rule("allow", "Bash(ls *)", position=0)
    deny_late = _rule("deny", "Bash(rm *)", position=5)
    ask = _rule("ask", "Bash(git push *)", position=1)
    deny_early = _rule("deny", "Read(./secrets/**)", position=1)
    allow_second = _rule("allow", "Skill(pdf)", position=0)

    response = _client(admin_user).get(CHANGELIST)

    shown = [rule.pk for rule in response.context["cl"].result_list]
    assert shown == [deny_early.pk, deny_late.pk, ask.pk, allow_first.pk, allow_second.pk]


def test_it_shows_scope_note_and_author_in_the_list(admin_user, django_user_model):
    carol = django_user_model.objects.create_user("carol", password="carol-pass-123")
    _rule("allow", "Bash(python *)", skill="pdf", author=carol, note="pdf scripts")
    _rule("deny", "Bash(rm *)")
    html = _client(admin_user).get(CHANGELIST).content.decode()
    assert '<td class="field-scope">skill: pdf</td>' in html
    assert '<td class="field-scope">global</td>' in html
    assert "pdf scripts" in html
    assert '<td class="field-author nowrap">carol</td>' in html


# ---------------------------------------------------------------- the form


def test_it_shows_the_parser_error_inline_and_stores_nothing(admin_user):
    response = _client(admin_user).post(ADD, _form_data(rule_text="Bash(git diff"))

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["rule_text"]
    assert errors == ["Unbalanced parentheses in 'Bash(git diff': add the closing ')'."]
    assert "add the closing &#x27;)&#x27;." in response.content.decode()
    assert not PermissionRule.objects.exists()


def test_it_suggests_the_tool_name_for_a_misspelt_tool(admin_user):
    response = _client(admin_user).post(ADD, _form_data(rule_text="bash(ls *)"))
    [error] = response.context["adminform"].form.errors["rule_text"]
    assert "Unknown tool 'bash'. Did you mean Bash?" in error
    assert not PermissionRule.objects.exists()


def test_it_saves_a_valid_rule_with_its_author_and_logs_the_addition(admin_user):
    response = _client(admin_user).post(
        ADD, _form_data(behavior="deny", rule_text="  Bash(git push *)  ", note="no pushes")
    )

    assert response.status_code == 302
    rule = PermissionRule.objects.get()
    assert (rule.behavior, rule.rule_text, rule.author) == ("deny", "Bash(git push *)", admin_user)
    entry = LogEntry.objects.get(object_id=str(rule.pk))
    assert entry.action_flag == ADDITION
    assert entry.user == admin_user
    assert entry.content_type == ContentType.objects.get_for_model(PermissionRule)


def test_it_logs_a_change_with_the_fields_that_changed(admin_user, django_user_model):
    author = django_user_model.objects.create_user("carol", password="carol-pass-123")
    rule = _rule("allow", "Bash(git *)", author=author)
    url = reverse("admin:skills_app_permissionrule_change", args=[rule.pk])

    response = _client(admin_user).post(url, _form_data(behavior="ask", rule_text="Bash(git *)"))

    assert response.status_code == 302
    rule.refresh_from_db()
    assert rule.behavior == "ask"
    assert rule.author == admin_user
    entry = LogEntry.objects.get(object_id=str(rule.pk), action_flag=CHANGE)
    assert "Behavior" in entry.get_change_message()


# ---------------------------------------------------------------- the tester


def test_it_offers_the_tester_form_on_the_changelist(admin_user):
    html = _client(admin_user).get(CHANGELIST).content.decode()
    assert f'action="{TESTER}"' in html
    assert 'name="call"' in html
    assert 'name="skill"' in html


def test_it_lets_a_deny_rule_beat_an_allow_rule(admin_user):
    _rule("allow", "Bash(git *)", position=0)
    deny = _rule("deny", "Bash(git push *)", position=9)
    client = _client(admin_user)

    result = _test(client, "Bash(git push origin main)").context["result"]

    assert result.decision.behavior == "deny"
    assert result.decision.rule.rule_id == deny.pk
    assert result.rule_url == reverse("admin:skills_app_permissionrule_change", args=[deny.pk])
    assert _test(client, "Bash(git status)").context["result"].decision.behavior == "allow"


def test_it_shows_the_decision_and_the_rule_that_made_it(admin_user):
    deny = _rule("deny", "Bash(git push *)")
    html = _test(_client(admin_user), "Bash(git push origin main)").content.decode()
    assert '<span class="decision-word">deny</span>' in html
    assert f"deny rule &quot;Bash(git push *)&quot; (admin #{deny.pk})" in html


def test_it_applies_a_skill_scoped_rule_only_while_that_skill_is_active(admin_user):
    _rule("allow", "Bash(python *)", skill="pdf")
    client = _client(admin_user)

    without = _test(client, "Bash(python fill.py)").context["result"]
    other = _test(client, "Bash(python fill.py)", skill="xlsx").context["result"]
    within = _test(client, "Bash(python fill.py)", skill="pdf").context["result"]

    assert (without.decision.behavior, without.decision.reason) == ("ask", "default for Bash: ask")
    assert without.scoped_elsewhere == 1
    assert other.decision.behavior == "ask"
    assert within.decision.behavior == "allow"
    assert 'skill "pdf" only' in within.decision.reason


def test_it_decides_skill_calls_and_paths_against_the_placeholder_workspace(admin_user):
    _rule("allow", "Skill(pdf)")
    _rule("allow", "Edit(./out/**)")
    client = _client(admin_user)

    assert _test(client, "Skill(pdf)").context["result"].decision.behavior == "allow"
    assert _test(client, "Skill(xlsx)").context["result"].decision.behavior == "ask"
    assert _test(client, "Edit(./out/report.md)").context["result"].decision.behavior == "allow"
    outside = _test(client, "Edit(//etc/passwd)").context["result"].decision
    assert outside.behavior == "deny"
    assert "outside the workspace" in outside.reason


def test_it_explains_a_malformed_call_instead_of_deciding(admin_user):
    client = _client(admin_user)

    unbalanced = _test(client, "Bash(git push origin main")
    unknown = _test(client, "Shell(ls)")

    assert unbalanced.status_code == 200
    assert unbalanced.context["result"] is None
    [error] = unbalanced.context["tester_form"].errors["call"]
    assert error.startswith("Unbalanced parentheses")
    assert "Write the call as Tool(argument)" in error
    assert "Unknown tool &#x27;Shell&#x27;" in unknown.content.decode()
    assert unknown.context["result"] is None


def test_it_reads_rule_changes_at_the_next_decision(admin_user):
    rule = _rule("allow", "Bash(make *)")
    client = _client(admin_user)
    assert _test(client, "Bash(make test)").context["result"].decision.behavior == "allow"
    url = reverse("admin:skills_app_permissionrule_change", args=[rule.pk])

    client.post(url, _form_data(behavior="deny", rule_text="Bash(make *)"))

    assert [r.behavior for r in admin_rules()] == ["deny"]
    assert _test(client, "Bash(make test)").context["result"].decision.behavior == "deny"

    client.post(url, _form_data(behavior="deny", rule_text="Bash(make *)", enabled=""))

    assert admin_rules() == []
    decision = _test(client, "Bash(make test)").context["result"].decision
    assert (decision.behavior, decision.rule) == ("ask", None)


def test_it_applies_the_active_skills_allowed_tools_but_admin_denies_still_win(
    admin_user, settings, tmp_path
):
    folder = tmp_path / "skills" / "pdf-fill"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: pdf-fill\ndescription: Fills PDF forms.\nallowed-tools: Bash(python *)\n---\n\n"
        "Run the filler.\n"
    )
    settings.SKILLS_DIRS = [str(tmp_path / "skills")]
    _rule("deny", "Bash(python -c *)")
    client = _client(admin_user)

    plain = _test(client, "Bash(python fill.py)").context["result"]
    within = _test(client, "Bash(python fill.py)", skill="pdf-fill").context["result"]
    denied = _test(client, "Bash(python -c 'import os')", skill="pdf-fill").context["result"]

    assert plain.decision.behavior == "ask"
    assert (within.decision.behavior, within.decision.rule.source) == ("allow", "skill")
    assert [r.text for r in within.skill_rules] == ["Bash(python *)"]
    assert "allowed-tools of skill" in within.decision.reason
    assert (denied.decision.behavior, denied.decision.rule.source) == ("deny", "admin")


def test_it_says_what_an_allowed_program_also_trusts(admin_user):
    _rule("allow", "Bash(git status)")
    html = _test(_client(admin_user), "Bash(git status)").content.decode()
    assert "<dt>Allowing it also trusts</dt>" in html
    assert "git also obeys .git/config" in html
    plain = _test(_client(admin_user), "Bash(echo hi)").context["result"]
    assert plain.also_trusts == ""


def test_it_says_a_broad_edit_rule_does_not_cover_a_file_that_steers_a_program(admin_user):
    _rule("allow", "Edit(**)")
    client = _client(admin_user)
    plain = _test(client, "Edit(./work/notes.md)").context["result"].decision
    steering = _test(client, "Edit(./.git/config)").context["result"].decision
    assert plain.behavior == "allow"
    assert steering.behavior == "ask"
    assert "needs an allow rule that names it, such as Edit(.git/**)" in steering.reason
    _rule("allow", "Edit(.git/**)")
    assert _test(client, "Edit(./.git/config)").context["result"].decision.behavior == "allow"


def test_the_rule_form_says_which_files_need_a_rule_of_their_own(admin_user):
    html = _client(admin_user).get(ADD).content.decode()
    assert "Edit(**) does not cover" in html and "*.pth" in html
