"""Groups scope the organisation's skills and the admin rules: who sees which skill, and which
rules apply to whom (shown by the rule tester)."""

from __future__ import annotations

import textwrap

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from skills_app.models import Conversation, PermissionRule
from skills_app.permissions.approvals import admin_rules
from skills_app.registry.skills import skills_for_user
from skills_app.runs import agent_setup as store
from tests.support.org import restrict

pytestmark = pytest.mark.django_db


def skill(root, name: str, body: str = "") -> None:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        textwrap.dedent(
            f"""\
            ---
            name: {name}
            description: The {name} skill for the tests.
            ---
            {body or name.upper() + "-BODY"}
            """
        )
    )


@pytest.fixture
def org_skills(settings, tmp_path):
    root = tmp_path / "org-skills"
    for name in ("payroll", "design-review", "everyone-notes"):
        skill(root, name)
    empty = tmp_path / "no-bundled"
    empty.mkdir()
    settings.BUNDLED_SKILLS_DIR = empty
    settings.SKILLS_DIRS = [root]
    finance = Group.objects.create(name="Finance")
    design = Group.objects.create(name="Design")
    restrict("payroll", finance)
    restrict("design-review", design)
    return finance, design


def names(user_id):
    return {s.name for s in skills_for_user(user_id).skills()}


def test_a_person_sees_exactly_the_skills_of_their_groups(org_skills, alice, bob):
    finance, design = org_skills
    alice.groups.add(finance)
    assert names(alice.pk) == {"payroll", "everyone-notes"}
    assert names(bob.pk) == {"everyone-notes"}
    bob.groups.add(finance, design)
    assert names(bob.pk) == {"payroll", "design-review", "everyone-notes"}


def test_a_hidden_skill_cannot_be_reached_by_name_either(org_skills, bob):
    """Not in the catalog, and not found by a /name or the model's Skill call."""
    conversation = Conversation.objects.create(owner=bob)
    provider = store.skills_for_conversation(conversation)
    assert provider.get("payroll") is None
    assert "payroll" not in {s.name for s in provider.skills()}


def test_a_personal_skill_of_the_same_name_stays_its_owners(org_skills, bob, settings, tmp_path):
    from skills_app.registry import uploads

    mine = tmp_path / "mine"
    skill(mine, "payroll", "BOBS-OWN-PAYROLL")
    uploads.install_directory(mine / "payroll", user=bob, personal=True)
    spec = skills_for_user(bob.pk).get("payroll")
    assert spec is not None and spec.source == "personal"
    assert "BOBS-OWN-PAYROLL" in spec.body


def test_the_skills_page_lists_only_the_groups_skills(org_skills, bob):
    client = Client()
    client.force_login(bob)
    page = client.get("/skills/").content.decode()
    assert "everyone-notes" in page and "payroll" not in page and "design-review" not in page


def test_a_rule_for_a_group_applies_only_to_its_members(alice, bob):
    finance = Group.objects.create(name="Finance")
    alice.groups.add(finance)
    limited = PermissionRule.objects.create(behavior="deny", rule_text="Bash(curl *)")
    limited.applies_to_groups.add(finance)
    personal = PermissionRule.objects.create(behavior="allow", rule_text="Bash(make *)")
    personal.applies_to_users.add(bob)
    PermissionRule.objects.create(behavior="ask", rule_text="Bash(git push *)")
    texts = {u: {r.text for r in admin_rules(u.pk)} for u in (alice, bob)}
    assert texts[alice] == {"Bash(curl *)", "Bash(git push *)"}
    assert texts[bob] == {"Bash(make *)", "Bash(git push *)"}
    # Without a person, only the rules for everyone.
    assert {r.text for r in admin_rules(None)} == {"Bash(git push *)"}


def test_the_rule_tester_shows_who_a_rule_applies_to(admin_user, alice, bob):
    finance = Group.objects.create(name="Finance")
    alice.groups.add(finance)
    rule = PermissionRule.objects.create(behavior="deny", rule_text="Bash(curl *)")
    rule.applies_to_groups.add(finance)
    client = Client()
    client.force_login(admin_user)
    url = "/admin/skills_app/permissionrule/test/"
    as_alice = client.get(url, {"call": "Bash(curl example.org)", "person": "alice"})
    page = as_alice.content.decode()
    assert 'class="skillscope-decision decision-deny"' in page and "only group Finance" in page
    as_bob = client.get(url, {"call": "Bash(curl example.org)", "person": "bob"}).content.decode()
    assert 'class="skillscope-decision decision-deny"' not in as_bob
    assert "1 rule that applies only to other people left out" in as_bob
    unknown = client.get(url, {"call": "Bash(ls)", "person": "nobody"}).content.decode()
    assert "There is no user" in unknown
