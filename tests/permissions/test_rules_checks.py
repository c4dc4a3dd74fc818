"""Rules you can't get wrong: the skill field offers the known skills, a rule naming a skill or tool
that does not exist is saved with a visible warning, and the rule tester replays stored calls."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from skills_app.models import (
    Approval,
    Conversation,
    PermissionRule,
    Run,
    RunEvent,
    SkillInvocation,
    SkillPackage,
)
from skills_app.permissions.checks import rule_warnings
from tests.support.loop_helpers import write_skills

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:skills_app_permissionrule_changelist")
ADD = reverse("admin:skills_app_permissionrule_add")
TESTER = reverse("admin:skills_app_permissionrule_test")


@pytest.fixture(autouse=True)
def skills(settings, tmp_path):
    settings.SKILLS_DIRS = [write_skills(tmp_path / "skills")]


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _form(**overrides) -> dict[str, str]:
    data = {"behavior": "allow", "rule_text": "Bash(ls *)", "skill": "", "enabled": "on"}
    data.update(position="0", note="", **overrides)
    return data


def _messages(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def test_the_skill_field_offers_the_known_skills(admin_user):
    SkillPackage.objects.create(name="uploaded-only")
    page = _client(admin_user).get(ADD).content.decode()
    assert 'list="id_skill-options"' in page
    datalist = page[page.index('<datalist id="id_skill-options">') :]
    datalist = datalist[: datalist.index("</datalist>")]
    assert '<option value="greeter">' in datalist
    assert '<option value="uploaded-only">' in datalist


@pytest.mark.parametrize(
    ("fields", "warning"),
    [
        ({"rule_text": "Skill(nonexistent-skill)"}, "No skill named 'nonexistent-skill'"),
        ({"rule_text": "Skill(nonexistent-skill *)"}, "No skill named 'nonexistent-skill'"),
        ({"rule_text": "Bash(ls *)", "skill": "ghost"}, "No skill named 'ghost'"),
        ({"rule_text": "WebFetch(domain:example.com)"}, "No tool named 'WebFetch' runs"),
        ({"rule_text": "mcp__files__read"}, "No tool named 'mcp__files__read' runs"),
    ],
)
def test_a_rule_naming_what_does_not_exist_is_saved_with_a_warning(admin_user, fields, warning):
    response = _client(admin_user).post(ADD, _form(**fields), follow=True)
    assert PermissionRule.objects.filter(rule_text=fields["rule_text"]).exists()
    shown = " ".join(_messages(response))
    assert "Saved with a warning" in shown and warning in shown


@pytest.mark.parametrize(
    "text", ["Skill(greeter)", "Skill(greeter *)", "Skill(gree*)", "Skill", "Bash(git diff *)"]
)
def test_a_rule_naming_what_exists_saves_without_a_warning(admin_user, text):
    response = _client(admin_user).post(ADD, _form(rule_text=text), follow=True)
    assert not any("warning" in m.lower() for m in _messages(response))
    assert rule_warnings(text, "greeter") == []


def test_the_list_and_the_rule_page_keep_showing_the_warning(admin_user):
    rule = PermissionRule.objects.create(behavior="allow", rule_text="Skill(ghost-skill)")
    client = _client(admin_user)
    assert "⚠ No skill named &#x27;ghost-skill&#x27;" in client.get(CHANGELIST).content.decode()
    page = client.get(reverse("admin:skills_app_permissionrule_change", args=[rule.pk]))
    assert any("ghost-skill" in m for m in _messages(page))


def test_a_rule_whose_skill_is_uploaded_later_stops_warning(admin_user):
    assert rule_warnings("Skill(later)", "")
    SkillPackage.objects.create(name="later")
    assert rule_warnings("Skill(later)", "") == []


# -- replaying a stored call --------------------------------------------------------------------


@pytest.fixture
def stored(alice):
    """A Bash call made under the greeter skill (allowed then), and an approval that was denied."""
    conversation = Conversation.objects.create(owner=alice, title="c")
    run = Run.objects.create(conversation=conversation, status=Run.DONE)
    invocation = SkillInvocation.objects.create(
        conversation=conversation, run=run, skill="greeter", caller="model", decision="allowed"
    )
    event = RunEvent.objects.create(
        conversation=conversation,
        run=run,
        seq=1,
        type="audit.tool",
        data={
            "tool": "Bash",
            "input": {"command": "git push origin main"},
            "decision": "allow",
            "reason": "rule #9 allowed it",
            "invocation_id": invocation.pk,
            "tool_use_id": "toolu_1",
        },
    )
    approval = Approval.objects.create(
        conversation=conversation,
        run=run,
        tool="Edit",
        input={"file_path": "out/report.md"},
        call_text="Edit(./out/report.md)",
        status=Approval.DENY,
        answered_by=alice,
        reason="no rule allows it",
    )
    return {"event": event, "approval": approval, "invocation": invocation}


def test_the_tester_replays_a_tool_call_from_the_audit_with_todays_rules(auditor, stored):
    client = _client(auditor)
    before = client.get(TESTER, {"event": stored["event"].pk})
    assert before.status_code == 200
    body = before.content.decode()
    assert 'value="Bash(git push origin main)"' in body and 'value="greeter"' in body
    assert before.context["result"].decision.behavior == "ask"  # today: no rule, Bash asks
    assert before.context["replay"].decided_then == "allow"
    PermissionRule.objects.create(behavior="deny", rule_text="Bash(git push *)")
    after = client.get(TESTER, {"event": stored["event"].pk})
    assert after.context["result"].decision.behavior == "deny"
    assert "Today's rules say" in after.content.decode()


def test_the_tester_replays_an_approval(auditor, stored):
    response = _client(auditor).get(TESTER, {"approval": stored["approval"].pk})
    assert response.context["replay"].decided_then == "ask, then deny by alice"
    assert response.context["result"].call.input == {"file_path": "out/report.md"}


def test_the_invocation_detail_and_the_approvals_list_offer_the_replay(auditor, stored):
    client = _client(auditor)
    detail = client.get(reverse("audit-invocation", args=[stored["invocation"].pk]))
    assert f"{TESTER}?event={stored['event'].pk}" in detail.content.decode()
    approvals = client.get(reverse("admin:skills_app_approval_changelist")).content.decode()
    assert f"{TESTER}?approval={stored['approval'].pk}" in approvals


def test_replaying_needs_the_audit(skill_manager, stored):
    """A skill manager may test typed calls, not read other people's calls out of the audit."""
    client = _client(skill_manager)
    assert client.get(TESTER, {"call": "Bash(ls)"}).status_code == 200
    assert client.get(TESTER, {"event": stored["event"].pk}).status_code == 403
    assert client.get(TESTER, {"approval": stored["approval"].pk}).status_code == 403


def test_replaying_an_unknown_or_hidden_call(auditor, django_user_model, stored):
    client = _client(auditor)
    assert client.get(TESTER, {"event": 999_999}).status_code == 404
    assert client.get(TESTER, {"event": "x"}).status_code == 404
    RunEvent.objects.filter(pk=stored["event"].pk).update(hidden=True)
    reader = django_user_model.objects.create_user("rita", is_staff=True)
    from django.contrib.auth.models import Permission

    reader.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_skillinvocation", "view_permissionrule"])
    )
    assert _client(reader).get(TESTER, {"event": stored["event"].pk}).status_code == 403
    assert client.get(TESTER, {"event": stored["event"].pk}).status_code == 200
