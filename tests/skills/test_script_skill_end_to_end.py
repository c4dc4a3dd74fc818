from __future__ import annotations

import json
import re
import shutil

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Permission

from skills_app.models import Approval, Conversation, PermissionRule, Run, RunEvent
from skills_app.workspaces import workspace_for
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import accepted, rows, run_turn, use_fake_model

pytestmark = pytest.mark.django_db(transaction=True)


def follow_the_skill(request):
    """A scripted model that does what the text-stats skill says: run its script."""
    last = request["messages"][-1]
    texts = [b.get("text", "") for b in last["content"] if b.get("type") == "text"]
    results = [b for b in last["content"] if b.get("type") == "tool_result"]
    hidden = next((t for t in texts if t.startswith("Base directory for this skill: ")), None)
    if hidden is not None:
        command = re.search(r"```bash\n(.+?)\n```", hidden, re.S).group(1).strip()
        return Reply.tool_use("Bash", {"command": command}, text="Running the script.")
    if results and "Launching skill" not in str(results[0]["content"]):
        return Reply.text("Done: " + str(results[0]["content"]).splitlines()[0])
    return Reply.tool_use("Skill", {"skill": "text-stats", "args": "work/notes.txt"})


@pytest.mark.parametrize("sandbox", ["none", "bwrap"])
async def test_a_script_skill_runs_under_its_allowed_tools_and_leaves_an_artifact(
    settings, fake_anthropic, alice, sandbox
):
    if sandbox == "bwrap" and shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed (scripts/test.sh installs it)")
    use_fake_model(settings, fake_anthropic)
    settings.SKILLS_DIRS = []
    settings.SANDBOX = sandbox
    if sandbox == "none":
        # Without a sandbox only holders of this permission may run commands.
        await sync_to_async(alice.user_permissions.add)(
            await Permission.objects.aget(codename="run_unsandboxed_commands")
        )
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill(text-stats)")
    conversation = await Conversation.objects.acreate(owner=alice, title="stats")
    workspace = await sync_to_async(workspace_for)(conversation.pk)
    (workspace.work_dir / "notes.txt").write_text("one two three\nfour five\n")
    fake_anthropic.set_responder(follow_the_skill)

    # answer="deny": any approval request would fail the run, so success proves no prompt was needed.
    run = await run_turn(conversation, "count the words in work/notes.txt", alice, answer="deny")

    assert run.status == Run.DONE
    assert not await Approval.objects.filter(run=run).aexists()
    bash_result = accepted(fake_anthropic)[2]["messages"][-1]["content"][0]
    assert bash_result.get("is_error") is not True, bash_result
    assert "5 words" in str(bash_result["content"])
    artifacts = workspace.artifacts()
    assert len(artifacts) == 1 and artifacts[0].startswith("out/")
    report = json.loads((workspace.root / artifacts[0]).read_text())
    assert report["total"]["words"] == 5
    event = await RunEvent.objects.filter(
        conversation=conversation, type="tool.result", data__name="Bash"
    ).afirst()
    assert event.data["artifacts"] == artifacts
    stored = await sync_to_async(rows)(conversation)
    assert stored[-1].content[0]["text"].startswith("Done:")
