"""Rules you can't get wrong: the skill field offers the known skills, a rule naming a skill or tool
that does not exist is saved with a visible warning, and the rule tester replays stored calls."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from skills_app.models import (
    Approval,
    Conversation,
    McpServer,
    McpToolDefinition,
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
        ({"rule_text": "mcp__files__read"}, "No MCP server named 'files' is registered"),
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


@pytest.mark.parametrize(
    ("behavior", "text", "fix"),
    [
        (
            "allow",
            "Write(**)",
            "writes are decided by Edit(...) rules, as in Claude Code; write Edit(**)",
        ),
        ("deny", "WebFetch(domain:example.com)", "a command that fetches is a Bash call"),
        ("ask", "NotebookEdit", "write Edit(./**/*.ipynb) instead"),
        ("allow", "skill_run(python3 scripts/x.py)", "write Bash(python3 scripts/x.py)"),
        ("deny", "skill_select_docs(greeter)", "write Skill(greeter) instead"),
        (
            "allow",
            "Bash(cd * && make)",
            "Write one allow rule per command instead: Bash(cd *), Bash(make)",
        ),
    ],
)
def test_a_rule_that_can_never_match_is_refused_with_what_to_write_instead(
    admin_user, behavior, text, fix
):
    response = _client(admin_user).post(ADD, _form(behavior=behavior, rule_text=text))
    assert response.status_code == 200  # the form again, with the error
    errors = " ".join(response.context["adminform"].form.errors["rule_text"])
    assert fix in errors
    assert not PermissionRule.objects.exists()


def test_a_deny_rule_spanning_several_commands_is_saved(admin_user):
    # Deny and ask rules are matched against the whole line too: this one can match.
    form = _form(behavior="deny", rule_text="Bash(cd * && make)")
    response = _client(admin_user).post(ADD, form, follow=True)
    assert PermissionRule.objects.filter(rule_text="Bash(cd * && make)").exists()
    assert not any("warning" in m.lower() for m in _messages(response))


def test_a_stored_rule_that_can_never_match_is_flagged_in_the_list(admin_user):
    PermissionRule.objects.create(behavior="allow", rule_text="Bash(cd * && make)")
    PermissionRule.objects.create(behavior="deny", rule_text="Bash(cd * && make)")
    page = _client(admin_user).get(CHANGELIST).content.decode()
    assert page.count("never allows a call") == 1


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


# -- the tester on rules that can never match ---------------------------------------------------


def test_the_tester_names_the_enabled_rules_that_can_never_match(admin_user):
    stuck = PermissionRule.objects.create(behavior="allow", rule_text="Bash(cd * && make)")
    PermissionRule.objects.create(behavior="allow", rule_text="Bash(git diff *)")
    response = _client(admin_user).get(TESTER, {"call": "Bash(cd src && make)"})
    assert response.context["result"].decision.behavior == "ask"  # the rule did not allow it
    never = response.context["result"].never_matching
    assert [(rule.rule_id, "never allows a call" in why) for rule, why in never] == [
        (stuck.pk, True)
    ]
    body = response.content.decode()
    assert 'id="tester-never"' in body
    assert "Write one allow rule per command instead: Bash(cd *), Bash(make)" in body
    assert reverse("admin:skills_app_permissionrule_change", args=[stuck.pk]) in body


def test_the_tester_says_when_no_call_of_that_tool_is_ever_decided_by_its_name(admin_user):
    response = _client(admin_user).get(TESTER, {"call": "skill_run(python3 scripts/x.py)"})
    note = response.context["result"].call_note
    assert note.startswith("No skill_run call is ever decided under that name: ")
    assert "write Bash(python3 scripts/x.py)" in note
    assert 'id="tester-call-note"' in response.content.decode()


def test_the_tester_shows_nothing_extra_when_every_rule_can_match(admin_user):
    PermissionRule.objects.create(behavior="allow", rule_text="Bash(git diff *)")
    response = _client(admin_user).get(TESTER, {"call": "Bash(git diff HEAD)"})
    assert response.context["result"].never_matching == ()
    assert response.context["result"].call_note == ""
    body = response.content.decode()
    assert 'id="tester-never"' not in body and 'id="tester-call-note"' not in body


# -- MCP rules --------------------------------------------------------------------------------


def _tickets_server() -> McpServer:
    server = McpServer.objects.create(
        name="tickets", kind="stdio", identity='stdio:["/opt/t"]', argv=["/opt/t"]
    )
    for tool in ("get_ticket", "close_ticket"):
        McpToolDefinition.objects.create(server=server, tool=tool, content_hash=tool * 2)
    return server


@pytest.mark.parametrize(
    ("text", "warning"),
    [
        ("mcp__tracker__get_ticket", "No MCP server named 'tracker' is registered"),
        ("mcp__tickets__delete_ticket", "lists no tool named 'delete_ticket'"),
        ("mcp__tickets__put_*", "No tool of the MCP server 'tickets' starts with 'put_'"),
    ],
)
def test_an_mcp_rule_naming_no_registered_server_or_tool_is_saved_with_a_warning(
    admin_user, text, warning
):
    _tickets_server()
    response = _client(admin_user).post(ADD, _form(behavior="deny", rule_text=text), follow=True)
    assert PermissionRule.objects.filter(rule_text=text).exists()
    shown = " ".join(_messages(response))
    assert "Saved with a warning" in shown and warning in shown


@pytest.mark.parametrize(
    "text", ["mcp__tickets", "mcp__tickets__*", "mcp__tickets__get_*", "mcp__tickets__close_ticket"]
)
def test_an_mcp_rule_naming_a_listed_tool_saves_without_a_warning(admin_user, text):
    _tickets_server()
    assert rule_warnings(text, "") == []


def test_a_star_inside_an_mcp_rule_is_refused_by_the_form(admin_user):
    response = _client(admin_user).post(ADD, _form(rule_text="mcp__tickets__a*b"))
    errors = " ".join(response.context["adminform"].form.errors["rule_text"])
    assert "a * may only end the name" in errors
    assert not PermissionRule.objects.exists()


def test_the_tester_explains_an_mcp_call_no_rule_names(admin_user):
    _tickets_server()
    PermissionRule.objects.create(behavior="allow", rule_text="mcp__tickets__get_*")
    response = _client(admin_user).get(TESTER, {"call": "mcp__tickets__close_ticket"})
    result = response.context["result"]
    assert result.decision.behavior == "ask"
    assert result.call_note.startswith("No rule names mcp__tickets__close_ticket")
    body = response.content.decode()
    assert 'id="tester-call-note"' in body and "an MCP call no rule names asks" in body


def test_the_tester_shows_that_deny_wins_for_an_mcp_call(admin_user):
    _tickets_server()
    allow = PermissionRule.objects.create(behavior="allow", rule_text="mcp__tickets", position=0)
    deny = PermissionRule.objects.create(
        behavior="deny", rule_text="mcp__tickets__close_ticket", position=1
    )
    PermissionRule.objects.create(behavior="deny", rule_text="mcp__tracker", position=2)
    response = _client(admin_user).get(TESTER, {"call": "mcp__tickets__close_ticket"})
    result = response.context["result"]
    assert (result.decision.behavior, result.decision.rule.rule_id) == ("deny", deny.pk)
    assert f'allow rule "mcp__tickets" (admin #{allow.pk})' in result.call_note
    assert "Deny wins over ask and allow" in result.call_note
    assert [rule.text for rule, _why in result.never_matching] == ["mcp__tracker"]
    assert "No MCP server named &#x27;tracker&#x27; is registered" in response.content.decode()


def test_the_tester_names_a_skill_rule_that_cannot_be_read(admin_user, settings, tmp_path):
    settings.SKILLS_DIRS = [
        write_skills(
            tmp_path / "more",
            {
                "triage": """\
                    ---
                    name: triage
                    description: Sorts tickets.
                    allowed-tools: mcp__tickets__get_* mcp__tickets__a*b
                    ---
                    Sort the tickets.
                    """
            },
        )
    ]
    _tickets_server()
    response = _client(admin_user).get(
        TESTER, {"call": "mcp__tickets__get_ticket", "skill": "triage"}
    )
    result = response.context["result"]
    assert result.decision.behavior == "allow"
    assert 'allowed-tools of skill "triage": mcp__tickets__get_*' in result.call_note
    never = [(rule.text, why) for rule, why in result.never_matching]
    assert len(never) == 1 and never[0][0] == "mcp__tickets__a*b"
    assert "a run ignores it" in never[0][1] and "a * may only end the name" in never[0][1]
