"""Issue 30: "as the source design", tool-result's own tools (bash, read_file, write_file,
edit_file) are the design's names and texts over Skillscope's safe implementations.

Attacks: read a skill's hidden files through the design's tools, leave the workspace through a
planted link or `..`, write into a staged skill, slip past a deny rule (the rules decide
`bash` as `Bash`, `read_file` as `Read`...), call a tool a bare deny removed. Positive
controls: the model did get the text, and the same calls do work where nothing forbids them.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from skills_app.models import Conversation, PermissionRule
from skills_app.workspaces import workspace_for
from tests.security.helpers import frames_text, frames_until, leaked, open_tab, resume
from tests.security.test_hidden_outbound import CANARY, GUIDE, HIDDEN, PLACEHOLDER, _skills
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import accepted, run_turn, use_fake_model

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fake(settings, fake_anthropic, tmp_path):
    use_fake_model(settings, fake_anthropic, retries=0)
    settings.RATE_LIMIT_MESSAGES_PER_MINUTE = 1000
    settings.SKILLS_DIRS = [_skills(tmp_path / "skills")]
    return fake_anthropic


async def design(owner: Any) -> Conversation:
    return await Conversation.objects.acreate(
        owner=owner, profile="tool-result", base_prompt="design"
    )


def results(fake: Any) -> list[dict[str, Any]]:
    return [r["messages"][-1]["content"][0] for r in accepted(fake)[1:]]


async def test_the_designs_tools_show_chatters_placeholders_for_skill_files(fake, alice):
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Bash(cat *)")
    conversation = await design(alice)
    fake.enqueue(
        Reply.tool_use("load_skill", {"name": "ledger"}),
        Reply.tool_use("read_file", {"path": "skills/ledger/SKILL.md"}),
        Reply.tool_use("bash", {"command": "cat skills/ledger/references/guide.md"}),
        Reply.text("The ledger is tidy."),
    )
    tab, connected = await open_tab(alice, conversation.pk)
    assert connected
    await resume(tab)
    await tab.send_json_to({"action": "send", "text": "tidy the ledger"})
    frames = await frames_until(tab, lambda f: f.get("type") == "run.finished", timeout=40)
    await tab.disconnect()
    assert frames[-1]["data"]["status"] == "done", frames[-1]
    # Positive control: the model got the files through the design's tools.
    model_saw = json.dumps(results(fake))
    assert CANARY in model_saw and "fireproof cabinet" in model_saw
    live = frames_text(frames)
    assert leaked(live, HIDDEN) == [] and CANARY not in live
    assert PLACEHOLDER in live
    assert leaked(live, [GUIDE]) == []


async def test_the_designs_tools_stay_in_the_workspace(fake, alice, tmp_path):
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Edit")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("OUTSIDE-SECRET\n")
    conversation = await design(alice)
    ws = await sync_to_async(workspace_for)(conversation.pk)
    os.symlink(outside / "secret.txt", ws.work_dir / "link.txt")
    os.symlink(outside, ws.work_dir / "door")
    fake.enqueue(
        Reply.tool_use("load_skill", {"name": "ledger"}),
        Reply.tool_use("read_file", {"path": "work/link.txt"}),
        Reply.tool_use("write_file", {"path": "work/door/planted.txt", "content": "x"}),
        Reply.tool_use("edit_file", {"path": "work/link.txt", "old_text": "OUT", "new_text": "IN"}),
        Reply.tool_use("write_file", {"path": "skills/ledger/SKILL.md", "content": "mine"}),
        Reply.tool_use("write_file", {"path": "work/fine.txt", "content": "fine"}),
        Reply.text("done"),
    )
    await run_turn(conversation, "go", alice, answer="allow_once")
    read, planted, edited, staged, fine = (r["content"] for r in results(fake)[1:])
    assert read == "Error: Path escapes workspace: work/link.txt"
    assert planted == "Error: Path escapes workspace: work/door/planted.txt"
    assert edited == "Error: Path escapes workspace: work/link.txt"
    assert staged.startswith("Error: ") and "read-only" in staged
    assert fine == "Wrote 4 bytes"  # positive control
    assert (outside / "secret.txt").read_text() == "OUTSIDE-SECRET\n"
    assert not (outside / "planted.txt").exists()
    assert "OUTSIDE-SECRET" not in json.dumps(accepted(fake))
    assert "mine" not in (ws.skills_dir / "ledger" / "SKILL.md").read_text()


async def test_the_rules_decide_the_designs_tools_as_skillscopes(fake, alice):
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Bash")
    await PermissionRule.objects.acreate(behavior="deny", rule_text="Bash(rm *)")
    await PermissionRule.objects.acreate(behavior="deny", rule_text="Read(./work/private/**)")
    conversation = await design(alice)
    ws = await sync_to_async(workspace_for)(conversation.pk)
    (ws.work_dir / "private").mkdir()
    (ws.work_dir / "private" / "notes.txt").write_text("PRIVATE-NOTES\n")
    fake.enqueue(
        Reply.tool_use("bash", {"command": "rm -f work/private/notes.txt"}),
        Reply.tool_use("bash", {"command": "echo ok && rm -f work/private/notes.txt"}),
        Reply.tool_use("read_file", {"path": "work/private/notes.txt"}),
        Reply.tool_use("bash", {"command": "echo allowed"}),
        Reply.text("done"),
    )
    await run_turn(conversation, "go", alice)
    first, nested, read, allowed = results(fake)
    for refused in (first, nested, read):
        assert refused["is_error"] is True and refused["content"].startswith("Permission denied")
    assert allowed["content"] == "allowed"  # positive control
    assert (ws.work_dir / "private" / "notes.txt").exists()
    assert "PRIVATE-NOTES" not in json.dumps(accepted(fake))


async def test_a_bare_deny_removes_the_designs_tool_it_stands_for(fake, alice):
    await PermissionRule.objects.acreate(behavior="deny", rule_text="Bash")
    conversation = await design(alice)
    fake.enqueue(Reply.tool_use("bash", {"command": "echo sneaky"}), Reply.text("done"))
    await run_turn(conversation, "go", alice)
    first = accepted(fake)[0]
    names = [t["name"] for t in first["tools"]]
    assert names == ["read_file", "write_file", "edit_file", "load_skill"]
    (refused,) = results(fake)
    assert refused["is_error"] is True and "sneaky" not in refused["content"]
    assert refused["content"].startswith('Error: unknown tool "bash"')
