"""Issue 42, point 2: the Skills page and a skill's page say what its commands will do for
this person (run unasked, ask first, denied) and why, as the runs' permission gate decides."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse

from skills_app.core.agent import TurnState
from skills_app.core.invocation import skill_rules
from skills_app.core.permissions import ToolCall
from skills_app.core.tools.workspace import Workspace
from skills_app.models import PermissionRule
from skills_app.permissions.approvals import PermissionGate
from skills_app.registry.consents import consents_for
from skills_app.registry.skills import skills_for_user

pytestmark = pytest.mark.django_db


def _page(user) -> str:
    client = Client()
    client.force_login(user)
    return client.get("/skills/").content.decode()


def _row(html: str, name: str) -> str:
    start = html.index(f'<tr class="catalog-row" data-skill="{name}"')
    return re.sub(r"\s+", " ", html[start : html.index("</tr>", start)])


def _said(row: str) -> str:
    return re.sub(r"<[^>]+>", "", row)


def test_a_bundled_skill_whose_allowed_tools_cover_its_command_says_it_runs_unasked(alice):
    row = _row(_page(alice), "text-stats")
    assert "asks first" not in row
    assert 'data-outlook="allow"' in row
    assert "runs its reviewed commands without asking" in _said(row)
    assert "because of its own allowed-tools" in _said(row)


def test_the_installs_consent_is_named_when_it_is_what_lets_a_command_run(alice):
    # commit-message has no allowed-tools: its one reviewed command runs under its install.
    row = _said(_row(_page(alice), "commit-message"))
    assert "runs its reviewed commands without asking" in row
    assert "the consent of the install of commit-message (bundled with Skillscope)" in row


def test_a_groups_ask_rule_makes_it_ask_for_that_groups_members_only(alice, bob):
    finance = Group.objects.create(name="finance")
    alice.groups.add(finance)
    rule = PermissionRule.objects.create(behavior="ask", rule_text="Bash(python3 *)")
    rule.applies_to_groups.add(finance)
    member = _row(_page(alice), "text-stats")
    assert 'data-outlook="ask"' in member
    assert "asks before each command" in _said(member)
    assert f"the rule Bash(python3 *) (#{rule.pk}), set for your group finance" in _said(member)
    outsider = _row(_page(bob), "text-stats")
    assert 'data-outlook="allow"' in outsider and "set for your group" not in outsider


def test_whether_loading_the_skill_asks_is_said_beside_what_its_commands_do(alice):
    # No rule names commit-message: loading it asks (the default); an allow rule lets text-stats load.
    PermissionRule.objects.create(behavior="allow", rule_text="Skill(text-stats)")
    page = _page(alice)
    asks = _said(_row(page, "commit-message"))
    assert "asks before it loads; runs its reviewed commands without asking" in asks
    assert "asks before it loads" not in _said(_row(page, "text-stats"))


def test_a_deny_rule_on_its_commands_says_they_are_denied(alice):
    rule = PermissionRule.objects.create(behavior="deny", rule_text="Bash(python3 *)")
    row = _said(_row(_page(alice), "table-kit"))
    assert "its commands are denied for you" in row
    assert f"the rule Bash(python3 *) (#{rule.pk})" in row


def test_a_skill_denied_outright_says_so_in_its_row_and_on_its_page(alice):
    PermissionRule.objects.create(behavior="deny", rule_text="Skill(text-stats)")
    row = _row(_page(alice), "text-stats")
    assert 'data-access="deny"' in row and ">denied for you</span>" in row
    client = Client()
    client.force_login(alice)
    page = client.get(reverse("skill-detail", args=["text-stats"])).content.decode()
    assert re.search(r'id="skill-outlook"[^>]*>\s*denied for you', page)


def test_the_skill_page_says_what_its_commands_do_and_why(alice):
    client = Client()
    client.force_login(alice)
    page = client.get(reverse("skill-detail", args=["text-stats"])).content.decode()
    said = re.sub(r"\s+", " ", page)
    assert 'id="skill-outlook" data-outlook="allow"' in said
    assert "Runs its reviewed commands without asking, because of its own allowed-tools." in said


def test_what_the_page_says_is_what_a_runs_gate_decides(alice, tmp_path):
    """The run's own gate, on the command the skill's text asks for, in a real workspace."""
    PermissionRule.objects.create(behavior="ask", rule_text="Bash(python3 *)")
    row = _row(_page(alice), "text-stats")
    spec = skills_for_user(alice.pk).get("text-stats")
    assert spec is not None
    workspace = Workspace(tmp_path / "ws")

    async def record(*_a: object, **_k: object) -> int:
        return 0

    gate = PermissionGate(
        conversation_id=0,
        run_id=0,
        user_id=alice.pk,
        workspace=workspace,
        record=record,
        consents=consents_for([spec]),
    )
    skill_dir = str(workspace.skills_dir / "text-stats")
    state = TurnState(
        active_skills=["text-stats"], skill_rules=skill_rules(spec, "allow", skill_dir)
    )
    call = ToolCall("Bash", {"command": f"python3 {skill_dir}/scripts/stats.py notes.md"})
    assert gate.rules(call, state).behavior == "ask"
    assert 'data-outlook="ask"' in row
