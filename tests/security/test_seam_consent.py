"""Seams of the reviewer's consent (#25) with the skill registry, groups (#26) and the designs'
tools (#30).

Attacks:
- a skill manager disables an organisation skill (or rolls it back) because its reviewed
  commands turned out harmful: a run already going on kept running them without asking;
- a person's own personal skill of the same name as a reviewed organisation skill hidden from
  them by their groups: it must not run under that review's consent;
- the design's `bash` ("as the source design") running the reviewed command: decided as Bash,
  so the consent covers it exactly as it covers Bash, and nothing around it.
Positive controls: before the change, the reviewed command ran without asking.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Group

from skills_app.models import Approval, Conversation, PermissionDecision, Run, SkillPackage
from skills_app.registry import review, uploads
from skills_app.workspaces import workspace_for
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import run_turn, use_fake_model
from tests.support.org import restrict
from tests.support.review_helpers import GREET_SCRIPT, greet_files, publish, upload_draft

pytestmark = pytest.mark.django_db(transaction=True)


def _command(request: dict) -> str | None:
    """The reviewed command from the hidden message of a request, if it has one."""
    for message in request["messages"]:
        content = message["content"] if isinstance(message["content"], list) else []
        for block in content:
            text = block.get("text", "") if block.get("type") == "text" else ""
            if text.startswith("Base directory"):
                return re.search(r"```bash\n(.+?)\n```", text, re.S).group(1).strip()
    return None


def _results(request: dict) -> list[dict]:
    last = request["messages"][-1]
    content = last["content"] if isinstance(last["content"], list) else []
    return [b for b in content if b.get("type") == "tool_result"]


@pytest.fixture
def live(settings, fake_anthropic, skill_manager):
    use_fake_model(settings, fake_anthropic)
    settings.SKILLS_DIRS = []
    return publish(skill_manager)


def _twice(change) -> Any:
    """A model that runs the reviewed command, lets `change` happen, then runs it again."""
    state = {"calls": 0}

    def responder(request: dict) -> Reply:
        command = _command(request)
        if command is None:
            return Reply.text("nothing to do")
        state["calls"] += 1
        if state["calls"] == 2:
            change()  # between the two tool calls, as a skill manager would act
        if state["calls"] <= 2:
            return Reply.tool_use("Bash", {"command": command})
        return Reply.text("done")

    return responder


@pytest.mark.parametrize("how", ["disable", "rollback"])
async def test_a_skill_disabled_or_rolled_back_mid_run_no_longer_runs_unasked(
    live, fake_anthropic, skill_manager, alice, how
):
    if how == "rollback":
        # v2 is live (same commands); v1 stays approved, so rolling back to it is allowed.
        files = greet_files(script=GREET_SCRIPT.replace("fine day", "grand day"))
        v2 = await sync_to_async(upload_draft)(skill_manager, files)
        await sync_to_async(_approve_and_activate)(v2, skill_manager)

    def change() -> None:
        package = SkillPackage.objects.get(name="org-greet", owner__isnull=True)
        if how == "disable":
            uploads.set_enabled(package, False)
        else:
            review.activate(package.versions.get(number=1), skill_manager)

    fake_anthropic.set_responder(_twice(change))
    conversation = await Conversation.objects.acreate(owner=alice, title="greet")
    run = await run_turn(conversation, "/org-greet Ada", alice, answer="deny")
    assert run.status == Run.DONE, run.error
    rows = [
        r
        async for r in PermissionDecision.objects.filter(
            conversation=conversation, tool="Bash"
        ).order_by("pk")
    ]
    assert len(rows) == 2, [(r.decision, r.source) for r in rows]
    assert rows[0].source == "review" and rows[0].decision == "allow"  # positive control
    # After the change, the same command is no longer under that review's consent.
    assert rows[1].source != "review", rows[1].reason
    assert await Approval.objects.filter(run=run).aexists()  # the person was asked


def _approve_and_activate(version, who) -> None:
    from tests.support.review_helpers import approve

    approve(version, who)
    review.activate(version, who)


async def test_a_personal_skill_named_like_a_hidden_reviewed_skill_gets_no_consent(
    live, fake_anthropic, alice, tmp_path
):
    group = await sync_to_async(Group.objects.create)(name="Greeters")
    await sync_to_async(restrict)("org-greet", group)
    # alice is not a greeter: her own org-greet, with the very same files, is what she gets.
    mine = tmp_path / "mine" / "org-greet"
    (mine / "scripts").mkdir(parents=True)
    for item in greet_files():
        (tmp_path / "mine" / item.path).write_bytes(item.data)
    await sync_to_async(uploads.install_directory)(mine, user=alice, personal=True)
    fake_anthropic.set_responder(_twice(lambda: None))
    conversation = await Conversation.objects.acreate(owner=alice, title="greet")
    run = await run_turn(conversation, "/org-greet Ada", alice, answer="deny")
    assert run.status == Run.DONE, run.error
    rows = [r async for r in PermissionDecision.objects.filter(conversation=conversation)]
    assert rows and all(r.source != "review" for r in rows), [r.reason for r in rows]


async def test_the_designs_bash_is_covered_exactly_as_bash(live, fake_anthropic, alice):
    conversation = await Conversation.objects.acreate(
        owner=alice, profile="tool-result", base_prompt="design"
    )
    ws = await sync_to_async(workspace_for)(conversation.pk)
    script = f"{ws.skills_dir / 'org-greet'}/scripts/greet.py"
    fake_anthropic.enqueue(
        Reply.tool_use("load_skill", {"name": "org-greet"}),
        Reply.tool_use("bash", {"command": f'python3 {script} "Ada"'}),
        Reply.tool_use("bash", {"command": f"python3 {script} Ada; id > out/pwned.txt"}),
        Reply.text("done"),
    )
    run = await run_turn(conversation, "greet Ada with org-greet", alice, answer="deny")
    assert run.status == Run.DONE, run.error
    exact, smuggled = [
        r
        async for r in PermissionDecision.objects.filter(
            conversation=conversation, tool="Bash"
        ).order_by("pk")
    ]
    # The design's bash runs the reviewed command under the review, as Bash would...
    assert exact.source == "review" and exact.decision == "allow", exact.reason
    # ...and nothing smuggled after it.
    assert smuggled.decision == "deny" and smuggled.source != "review", smuggled.reason
    assert not (ws.out_dir / "pwned.txt").exists()
