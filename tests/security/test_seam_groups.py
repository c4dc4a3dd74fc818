"""Seams of group-scoped skills (#26) with the skill pages (#25), the designs' tools (#30) and
sessions that follow the account (#23).

"payroll" is restricted to the Finance group. Attacks by people outside it:
- its page, the `/` menu, the comparison page, `skill://` inputs, the design's `load_skill`;
- a person removed from Finance by the directory: their open tab, and the copy of payroll
  staged in their conversation's workspace while they were a member (Read, Grep and Glob of a
  staged copy of a skill a deny rule refuses are denied; of one no longer offered they were not:
  the model went on reading and following it);
- the skill page and the catalog saying what the rules mean *for them*: a rule for one group
  was read as a rule for nobody.
Positive controls: a member reaches payroll by each of these ways.
"""

from __future__ import annotations

import json
import os
import textwrap
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Group
from django.urls import reverse

from skills_app.chat.consumers import ACCOUNT_CHANGED
from skills_app.models import Conversation, PermissionRule, Run
from tests.security.helpers import client_of, open_tab, resume
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import accepted, run_turn, use_fake_model
from tests.support.org import restrict

PAYROLL_BODY = (
    "PAYROLL-7f3a: pay the contractors on the second Friday and never round the overtime up "
    "to the next quarter hour.\n"
)


def _skill(root, name: str, body: str) -> None:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        textwrap.dedent(
            f"""\
            ---
            name: {name}
            description: The {name} skill of the organisation.
            ---
            """
        )
        + body
    )


@pytest.fixture
def finance(settings, tmp_path) -> Group:
    root = tmp_path / "org-skills"
    _skill(root, "payroll", PAYROLL_BODY)
    _skill(root, "notes", "Take notes in bullet points, one line each, no more than ten.\n")
    empty = tmp_path / "no-bundled"
    empty.mkdir()
    settings.BUNDLED_SKILLS_DIR = empty
    settings.SKILLS_DIRS = [root]
    settings.RATE_LIMIT_MESSAGES_PER_MINUTE = 1000
    group = Group.objects.create(name="Finance")
    restrict("payroll", group)
    return group


def _menu(client: Any, conversation: Conversation) -> str:
    return client.get(reverse("conversation", args=[conversation.pk])).content.decode()


@pytest.mark.django_db
def test_an_outsider_finds_no_page_menu_entry_or_comparison_of_a_group_skill(
    finance, alice, bob, django_user_model
):
    alice.groups.add(finance)
    outsider, member = client_of(bob), client_of(alice)
    assert outsider.get(reverse("skill-detail", args=["payroll"])).status_code == 404
    assert member.get(reverse("skill-detail", args=["payroll"])).status_code == 200
    mine = Conversation.objects.create(owner=bob)
    theirs = Conversation.objects.create(owner=alice)
    assert "/skills/s/payroll/" not in _menu(outsider, mine)
    assert "/skills/s/payroll/" in _menu(member, theirs)
    # The comparison page (staff): an outsider's post naming it is refused as unknown.
    staff = django_user_model.objects.create_user("stu", password="stu-pass-123", is_staff=True)
    response = client_of(staff).post(
        reverse("compare-start"), {"prompt": "pay them", "skills": ["payroll"]}
    )
    assert response.status_code == 400 and "Unknown skill(s): payroll" in response.content.decode()


@pytest.mark.django_db(transaction=True)
async def test_an_outsider_cannot_reach_a_group_skill_through_the_designs_tools(
    settings, fake_anthropic, finance, bob
):
    use_fake_model(settings, fake_anthropic, retries=0)
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill")
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Bash")
    design = await Conversation.objects.acreate(
        owner=bob, profile="tool-result", base_prompt="design"
    )
    fake_anthropic.enqueue(Reply.tool_use("load_skill", {"name": "payroll"}), Reply.text("ok"))
    await run_turn(design, "/payroll", bob)
    toolset = await Conversation.objects.acreate(owner=bob, profile="system-prompt")
    fake_anthropic.enqueue(
        Reply.tool_use("skill_load", {"skill": "notes"}),
        Reply.tool_use(
            "skill_run",
            {
                "skill": "notes",
                "command": "cat work/inputs/SKILL.md",
                "inputs": [{"src": "skill://payroll/SKILL.md"}],
            },
        ),
        Reply.text("ok"),
    )
    await run_turn(toolset, "take notes", bob)
    saw = json.dumps([r["messages"] for r in accepted(fake_anthropic)])
    assert "PAYROLL-7f3a" not in saw
    assert "pay the contractors" not in saw
    # Not named in the design's catalog either.
    assert all("payroll" not in r.system_text for r in accepted(fake_anthropic))


@pytest.mark.django_db(transaction=True)
async def test_a_person_removed_from_the_group_loses_the_skill_and_its_staged_copy(
    settings, fake_anthropic, finance, alice
):
    use_fake_model(settings, fake_anthropic, retries=0)
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill")
    await sync_to_async(alice.groups.add)(finance)
    conversation = await Conversation.objects.acreate(owner=alice, title="pay")
    fake_anthropic.enqueue(
        Reply.tool_use("Skill", {"skill": "payroll"}),
        Reply.tool_use("Read", {"file_path": "skills/payroll/SKILL.md"}),
        Reply.text("Paid."),
    )
    run = await run_turn(conversation, "pay the contractors", alice)
    assert run.status == Run.DONE, run.error
    assert "PAYROLL-7f3a" in json.dumps(accepted(fake_anthropic)[-1]["messages"])  # a member
    seen = len(accepted(fake_anthropic))

    # The directory drops alice from Finance while her tab is open.
    tab, connected = await open_tab(alice, conversation.pk)
    assert connected
    await resume(tab)
    await sync_to_async(alice.groups.remove)(finance)
    while True:
        output = await tab.receive_output(timeout=10)
        if output["type"] == "websocket.close":
            assert output.get("code") == ACCOUNT_CHANGED
            break

    fake_anthropic.enqueue(
        Reply.tool_use("Read", {"file_path": "skills/payroll/SKILL.md"}),
        Reply.tool_use("Grep", {"pattern": "PAYROLL-7f3a", "output_mode": "content"}),
        Reply.tool_use("Glob", {"pattern": "skills/payroll/**"}),
        Reply.tool_use("Skill", {"skill": "payroll"}),
        Reply.text("I cannot."),
    )
    run = await run_turn(conversation, "pay them again", alice)
    assert run.status == Run.DONE, run.error
    later = accepted(fake_anthropic)[seen:]
    results = [r["messages"][-1]["content"][0] for r in later[1:]]
    read, grep, glob, skill = (json.dumps(r) for r in results)
    assert "PAYROLL-7f3a" not in read and "pay the contractors" not in read
    assert "not offered" in read or "denied" in read, read
    assert "pay the contractors" not in grep and "SKILL.md" not in grep  # the pattern is echoed
    assert "SKILL.md" not in glob
    assert "PAYROLL-7f3a" not in skill and "payroll" in skill  # unknown skill, by name


@pytest.mark.django_db
def test_the_skill_page_and_catalog_say_what_a_groups_rule_means_for_each_person(
    finance, alice, bob
):
    rule = PermissionRule.objects.create(behavior="deny", rule_text="Skill(notes)")
    rule.applies_to_groups.add(finance)
    alice.groups.add(finance)
    member = client_of(alice).get(reverse("skill-detail", args=["notes"])).content.decode()
    assert 'data-access="deny"' in member, "the deny rule applies to alice"
    outsider = client_of(bob).get(reverse("skill-detail", args=["notes"])).content.decode()
    assert 'data-access="deny"' not in outsider
    # The `/` menu leaves out what a rule refuses the person outright; it stays for others.
    assert "/skills/s/notes/" not in _menu(
        client_of(alice), Conversation.objects.create(owner=alice)
    )
    assert "/skills/s/notes/" in _menu(client_of(bob), Conversation.objects.create(owner=bob))


@pytest.mark.django_db(transaction=True)
async def test_a_command_cannot_read_a_skill_folder_the_server_keeps_under_usr(
    settings, tmp_path, bob
):
    """The sandbox binds /usr read-only for the programs it runs. An operator who keeps
    SKILLS_DIRS there (/usr/local/share/...) left every skill's files readable by any command,
    group-restricted ones included, whatever the skill's groups said."""
    import shutil
    import uuid
    from pathlib import Path

    from skills_app.core.tools.bash import BashTool
    from skills_app.core.tools.sandbox import describe_sandbox
    from skills_app.runs.factory import tool_context
    from skills_app.workspaces import workspace_for

    if not describe_sandbox("auto").sandboxed:
        pytest.skip("bubblewrap does not work here")
    base = Path("/usr/local/share")
    if not os.access(base, os.W_OK):
        pytest.skip("needs a writable /usr/local/share to plant a server skill folder")
    root = base / f"skillscope-test-{uuid.uuid4().hex[:8]}"
    try:
        _skill(root, "payroll", PAYROLL_BODY)
        settings.SKILLS_DIRS = [root]
        restrict_group = await sync_to_async(Group.objects.create)(name="Finance")
        await sync_to_async(restrict)("payroll", restrict_group)
        conversation = await Conversation.objects.acreate(owner=bob)
        ws = await sync_to_async(workspace_for)(conversation.pk)
        ctx = tool_context(ws)
        result = await BashTool().run({"command": f"cat {root}/payroll/SKILL.md; true"}, ctx)
        assert "PAYROLL-7f3a" not in result.content, result.content
    finally:
        shutil.rmtree(root, ignore_errors=True)
