"""Approvals in plain words: a person's /name is consent, prompts say the action with workspace
paths, the rule sits behind "why?", and answered approvals stay in the transcript."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from skills_app.chat.rendering import render_approval
from skills_app.models import Approval, PermissionRule, Run
from skills_app.permissions.approvals import answer_approval
from skills_app.runs import supervisor as runs
from skills_app.workspaces import workspace_for
from tests.permissions.test_approvals import pending
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import use_fake_model, write_skills

# Only the tests that run code in other threads (async ones) need real transactions.
pytestmark = pytest.mark.django_db

SKILLS = {
    "release-notes": """\
        ---
        name: release-notes
        description: Writes release notes from the changes.
        ---
        RELEASE-NOTES-BODY
        """
}


@pytest.fixture
def fake(settings, fake_anthropic, tmp_path):
    use_fake_model(settings, fake_anthropic)
    settings.SKILLS_DIRS = [write_skills(tmp_path / "skills", SKILLS)]
    settings.RATE_LIMIT_MESSAGES_PER_MINUTE = 1000
    return fake_anthropic


@pytest.mark.django_db(transaction=True)
async def test_a_slash_command_is_consent_under_the_default_ask(fake, conversation, alice):
    fake.enqueue(Reply.text("Notes written."))
    run = await runs.start_run(conversation.pk, "/release-notes v2", user_id=alice.pk)
    await runs.wait_for_run(run.pk, timeout=20)
    assert (await Run.objects.aget(pk=run.pk)).status == Run.DONE
    assert not await Approval.objects.filter(run=run).aexists()
    assert "RELEASE-NOTES-BODY" in str(fake.requests[-1]["messages"])


@pytest.mark.django_db(transaction=True)
async def test_an_admin_ask_rule_for_the_skill_still_asks_the_user(fake, conversation, alice):
    await PermissionRule.objects.acreate(behavior="ask", rule_text="Skill(release-notes)")
    fake.enqueue(Reply.text("ok"))
    run = await runs.start_run(conversation.pk, "/release-notes", user_id=alice.pk)
    approval = await pending(run.pk)
    assert approval.rule_text == "Skill(release-notes)"
    await sync_to_async(answer_approval)(approval.pk, alice.pk, "allow_once")
    await runs.wait_for_run(run.pk, timeout=20)


@pytest.mark.django_db(transaction=True)
async def test_a_deny_rule_still_refuses_a_slash_command(fake, conversation, alice):
    await PermissionRule.objects.acreate(behavior="deny", rule_text="Skill(release-notes)")
    run = await runs.start_run(conversation.pk, "/release-notes", user_id=alice.pk)
    await runs.wait_for_run(run.pk, timeout=20)
    assert not await Approval.objects.filter(run=run).aexists()
    assert "RELEASE-NOTES-BODY" not in str(fake.requests)


@pytest.mark.django_db(transaction=True)
async def test_a_model_started_skill_still_asks(fake, conversation, alice):
    fake.enqueue(Reply.tool_use("Skill", {"skill": "release-notes"}), Reply.text("done"))
    run = await runs.start_run(conversation.pk, "write the notes", user_id=alice.pk)
    approval = await pending(run.pk)
    assert approval.tool == "Skill"
    await sync_to_async(answer_approval)(approval.pk, alice.pk, "deny")
    await runs.wait_for_run(run.pk, timeout=20)


# -- the words ----------------------------------------------------------------------------------


def _approval(conversation, alice, tool, data, **extra):
    run = Run.objects.create(conversation=conversation, status=Run.WAITING, started_by=alice)
    return Approval.objects.create(
        conversation=conversation,
        run=run,
        tool=tool,
        input=data,
        call_text=f"{tool}(...)",
        **extra,
    )


def test_a_command_is_described_in_words_without_server_paths(conversation, alice):
    root = str(workspace_for(conversation.pk).root)
    approval = _approval(
        conversation,
        alice,
        "Bash",
        {"command": f"python3 {root}/skills/text-stats/scripts/stats.py README.md"},
        rule_text="Bash",
        reason='ask rule "Bash" (admin #4)',
    )
    html = render_approval(approval, can_inspect=False)
    assert "Run a command:" in html
    assert "python3 skills/text-stats/scripts/stats.py README.md" in html
    assert root not in html and "/workspaces/" not in html
    why = html[html.index("<summary>why?</summary>") :]
    assert "The rule “Bash” asks before this." in why
    assert html.index("why?") < html.index("admin #4")  # the rule syntax only behind "why?"


def test_a_write_names_the_workspace_path(conversation, alice):
    root = str(workspace_for(conversation.pk).root)
    approval = _approval(
        conversation,
        alice,
        "Write",
        {"file_path": f"{root}/out/report.md", "content": "# Report"},
        reason=f"default for Write: ask ({root}/out/report.md)",
    )
    html = render_approval(approval, can_inspect=False)
    assert "Allow writing a file?" in html and "Write <code" in html
    assert ">out/report.md</code>" in html
    assert root not in html


def test_an_answered_approval_is_a_compact_line_that_stays_after_reload(conversation, alice):
    from skills_app.core.transcript import StoredMessage
    from skills_app.runs import store

    store.append_message(conversation.pk, StoredMessage.text("user", "clean up"))
    approval = _approval(conversation, alice, "Bash", {"command": "rm -rf build"})
    answer_approval(approval.pk, alice.pk, "deny", reason="keep it")
    store.append_message(conversation.pk, StoredMessage.text("assistant", "Left it alone."))
    client = Client()
    client.force_login(alice)
    page = client.get(f"/c/{conversation.pk}/").content.decode()
    line = page[page.index(f'id="approval-{approval.pk}"') :]
    assert 'data-status="deny"' in page and "approval-answered" in page
    assert "Run a command: <code" in line and "denied" in line and "keep it" in line
    assert "Allow once" not in line.split("</div>")[0]
    # In place: after the message it answered, before the answer that followed.
    assert page.index("clean up") < page.index(f"approval-{approval.pk}")
    assert page.index(f"approval-{approval.pk}") < page.index("Left it alone.")
