from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async

from skills_app.core.tools.bash import SAFE_PATH
from skills_app.models import Conversation, PermissionRule, SkillInvocation
from skills_app.registry.uploads import install_archive
from skills_app.runs import agent_setup
from skills_app.workspaces import workspace_for
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import (
    accepted,
    count_in_request,
    rows,
    run_turn,
    use_fake_model,
    write_skills,
)
from tests.support.upload_helpers import make_zip

pytestmark = pytest.mark.django_db(transaction=True)

GUIDE = """\
---
description: Writes in the house style.
metadata:
  tags: [writing, style]
---
GUIDE-BODY-MARKER: read references/voice.md when tone matters.
"""


@pytest.fixture
def fake(settings, fake_anthropic, tmp_path):
    use_fake_model(settings, fake_anthropic)
    root = write_skills(tmp_path / "skills")
    write_skills(root, {"guide": GUIDE})
    (root / "guide" / "references").mkdir()
    (root / "guide" / "references" / "voice.md").write_text("VOICE-DOC-MARKER: warm, short.\n")
    settings.SKILLS_DIRS = [root]
    PermissionRule.objects.create(behavior="allow", rule_text="Skill")
    return fake_anthropic


def conversation_with(alice, profile):
    return Conversation.objects.create(owner=alice, title=profile, profile=profile)


async def test_tool_result_profile_lists_skills_in_the_system_prompt(fake, alice):
    conversation = await sync_to_async(conversation_with)(alice, "tool-result")
    fake.enqueue(Reply.text("ok"))
    await run_turn(conversation, "hi", alice)
    request = accepted(fake)[0]
    assert "Skills available:\n" in request.system_text
    assert "  - guide: Writes in the house style. [writing, style]" in request.system_text
    names = [t["name"] for t in request["tools"]]
    assert "load_skill" in names and "Skill" not in names
    assert "GUIDE-BODY-MARKER" not in json.dumps(request)


async def test_load_skill_returns_the_body_as_a_hidden_tool_result(fake, alice):
    conversation = await sync_to_async(conversation_with)(alice, "tool-result")
    fake.enqueue(Reply.tool_use("load_skill", {"name": "guide"}), Reply.text("Styled."))
    await run_turn(conversation, "write nicely", alice)
    follow_up = accepted(fake)[1]
    result = follow_up["messages"][-1]["content"][0]
    assert result["type"] == "tool_result"
    assert result["content"].startswith('<skill name="guide">\n')
    assert result["content"].endswith("\n</skill>")
    assert count_in_request(follow_up, "GUIDE-BODY-MARKER") == 1
    stored = await sync_to_async(rows)(conversation)
    hidden = [m for m in stored if m.is_meta]
    assert [m.kind for m in hidden] == ["skill_prompt"]
    visible = [m for m in stored if not m.is_meta]
    assert "GUIDE-BODY-MARKER" not in json.dumps([m.content for m in visible])
    chip = next(m for m in stored if m.kind == "skill_status")
    assert chip.to_model is False
    invocation = await SkillInvocation.objects.aget(conversation=conversation)
    assert invocation.decision == "allowed" and invocation.injected_text in result["content"]


async def test_load_skill_with_an_unknown_name_lists_the_available_ones(fake, alice):
    conversation = await sync_to_async(conversation_with)(alice, "tool-result")
    fake.enqueue(Reply.tool_use("load_skill", {"name": "nope"}), Reply.text("ok"))
    await run_turn(conversation, "go", alice)
    result = accepted(fake)[1]["messages"][-1]["content"][0]
    # The design's own error text, a plain result (it never sets is_error).
    assert "is_error" not in result
    prefix = "Error: Unknown skill 'nope'. Available: "
    assert result["content"].startswith(prefix)
    names = result["content"].removeprefix(prefix).split(", ")
    assert {"greeter", "guide", "model-only"} <= set(names) and "manual-only" not in names


async def test_skill_loading_is_gated_by_skill_rules_in_every_profile(fake, alice):
    await PermissionRule.objects.acreate(behavior="deny", rule_text="Skill(guide)")
    for profile, tool, key in [
        ("tool-result", "load_skill", "name"),
        ("system-prompt", "skill_load", "skill"),
    ]:
        conversation = await sync_to_async(conversation_with)(alice, profile)
        fake.enqueue(Reply.tool_use(tool, {key: "guide"}), Reply.text("ok"))
        await run_turn(conversation, "go", alice)
        result = accepted(fake)[-1]["messages"][-1]["content"][0]
        assert result["content"].startswith("Error: ") and "Skill(guide)" in result["content"]
        # tool-result answers in the design's plain text; the toolset flags the error.
        assert result.get("is_error", False) is (profile == "system-prompt")


async def test_system_prompt_profile_merges_loaded_bodies_and_docs_into_the_system(fake, alice):
    conversation = await sync_to_async(conversation_with)(alice, "system-prompt")
    fake.enqueue(
        Reply.tool_use("skill_list", {}),
        Reply.tool_use("skill_load", {"skill": "guide"}),
        Reply.tool_use("skill_select_docs", {"skill": "guide", "docs": ["references/voice.md"]}),
        Reply.text("Done."),
    )
    await run_turn(conversation, "write nicely", alice)
    first, second, third, fourth = accepted(fake)[:4]
    assert {"skill_list", "skill_load", "skill_select_docs", "skill_run"} <= {
        t["name"] for t in first["tools"]
    }
    assert "If a skill is not loaded, call skill_load" in first.system_text
    assert "guide: Writes in the house style." in second["messages"][-1]["content"][0]["content"]
    assert "GUIDE-BODY-MARKER" not in first.system_text and "GUIDE-BODY-MARKER" in third.system_text
    assert "GUIDE-BODY-MARKER" not in json.dumps(third["messages"])
    assert "VOICE-DOC-MARKER" in fourth.system_text
    # What the model saw stays reconstructible from the stored rows.
    rebuilt = await sync_to_async(agent_setup.build_request)(conversation)
    assert rebuilt.system == fourth.system_text


async def test_skill_run_stages_and_runs_a_skill_never_loaded_under_the_bash_rules(fake, alice):
    """Seed 004's `_run_async_impl` has no load check: skill_run stages the skill as needed."""
    conversation = await sync_to_async(conversation_with)(alice, "system-prompt")
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Bash(echo *)")
    command = 'echo "$SKILL_NAME" > "$OUTPUT_DIR/name.txt"; echo ran'
    fake.enqueue(
        Reply.tool_use(
            "skill_run", {"skill": "guide", "command": command, "output_files": ["out/*.txt"]}
        ),
        Reply.tool_use("skill_run", {"skill": "guide", "command": "rm -rf work"}),
        Reply.text("ok"),
    )
    await run_turn(conversation, "run it", alice, answer="deny")
    sent = accepted(fake)
    ran = json.loads(sent[1]["messages"][-1]["content"][0]["content"])
    assert ran["exit_code"] == 0 and ran["stdout"].strip() == "ran" and ran["timed_out"] is False
    assert ran["output_files"] == [
        {"name": "out/name.txt", "mime_type": "text/plain", "size": 6, "content": "guide\n"}
    ]
    staged = (await sync_to_async(workspace_for)(conversation.pk)).skills_dir / "guide"
    assert (staged / "SKILL.md").is_file()
    # Run, not loaded: the body is not put in the system prompt.
    assert "GUIDE-BODY-MARKER" not in sent[2].system_text
    # The Bash rules still decide the command: this one asked, and the answer was no.
    denied = sent[2]["messages"][-1]["content"][0]
    assert denied["is_error"] and "Permission denied" in denied["content"]


async def test_skill_run_of_a_denied_skill_is_refused_before_anything_runs(fake, alice):
    conversation = await sync_to_async(conversation_with)(alice, "system-prompt")
    await PermissionRule.objects.acreate(behavior="deny", rule_text="Skill(guide)")
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Bash")
    fake.enqueue(
        Reply.tool_use("skill_run", {"skill": "guide", "command": "touch $WORK_DIR/ran"}),
        Reply.text("ok"),
    )
    run = await run_turn(conversation, "run it", alice)
    refused = accepted(fake)[1]["messages"][-1]["content"][0]
    assert refused["is_error"] and "Skill(guide)" in refused["content"]
    workspace = await sync_to_async(workspace_for)(conversation.pk)
    assert not (workspace.work_dir / "ran").exists()
    assert not (workspace.skills_dir / "guide").exists()  # never staged
    assert not await run.approvals.aexists()


async def test_skill_run_of_a_skill_never_loaded_asks_about_the_skill_first(fake, alice):
    # Without a rule on Skill, using a skill asks, as loading it would; then its command asks.
    await PermissionRule.objects.filter(rule_text="Skill").adelete()
    conversation = await sync_to_async(conversation_with)(alice, "system-prompt")
    fake.enqueue(
        Reply.tool_use("skill_run", {"skill": "guide", "command": "touch $WORK_DIR/ran"}),
        Reply.text("ok"),
    )
    run = await run_turn(conversation, "run it", alice, answer="deny")
    refused = accepted(fake)[1]["messages"][-1]["content"][0]
    assert refused["is_error"] and 'the skill "guide" may not be used here' in refused["content"]
    asked = [a.tool async for a in run.approvals.order_by("pk")]
    assert asked == ["Skill"]  # the command was never put to the person
    workspace = await sync_to_async(workspace_for)(conversation.pk)
    assert not (workspace.work_dir / "ran").exists()


async def test_skill_run_of_a_skill_not_offered_here_is_refused(fake, alice, bob):
    def upload() -> None:
        body = "---\nname: bobs-notes\ndescription: Bob's.\n---\nBOB-BODY\n"
        install_archive(make_zip({"SKILL.md": body}), "bobs-notes.zip", user=bob, personal=True)

    await sync_to_async(upload)()
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Bash")
    conversation = await sync_to_async(conversation_with)(alice, "system-prompt")
    fake.enqueue(
        Reply.tool_use("skill_run", {"skill": "bobs-notes", "command": "cat SKILL.md"}),
        Reply.text("ok"),
    )
    await run_turn(conversation, "run it", alice)
    refused = accepted(fake)[1]["messages"][-1]["content"][0]
    assert refused["is_error"] and 'unknown skill "bobs-notes"' in refused["content"]
    assert "BOB-BODY" not in json.dumps(accepted(fake)[1])


async def test_a_slash_command_in_the_toolset_profile_loads_into_the_system_prompt(fake, alice):
    conversation = await sync_to_async(conversation_with)(alice, "system-prompt")
    fake.enqueue(Reply.text("ok"))
    await run_turn(conversation, "/guide be brief", alice)
    request = accepted(fake)[0]
    assert "GUIDE-BODY-MARKER" in request.system_text
    assert "GUIDE-BODY-MARKER" not in json.dumps(request["messages"])


async def test_skill_run_keeps_the_environment_the_tool_sets(fake, alice):
    conversation = await sync_to_async(conversation_with)(alice, "system-prompt")
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Bash")
    command = 'echo "mode=$MODE skill=$SKILL_NAME out=$OUTPUT_DIR path=$PATH"'
    fake.enqueue(
        Reply.tool_use("skill_load", {"skill": "guide"}),
        # A variable the tool sets may not be replaced, nor one that makes bash load code.
        Reply.tool_use(
            "skill_run",
            {"skill": "guide", "command": command, "env": {"SKILL_NAME": "other", "MODE": "x"}},
        ),
        Reply.tool_use("skill_run", {"skill": "guide", "command": command, "env": {"PATH": "/x"}}),
        Reply.tool_use(
            "skill_run", {"skill": "guide", "command": command, "env": {"BASH_ENV": "w/.x.sh"}}
        ),
        Reply.tool_use("skill_run", {"skill": "guide", "command": command, "env": {"MODE": "f"}}),
        Reply.text("ok"),
    )
    await run_turn(conversation, "run it", alice, answer="deny")
    sent = accepted(fake)
    results = [sent[i]["messages"][-1]["content"][0] for i in (2, 3, 4, 5)]
    for refused, name in zip(results[:3], ("SKILL_NAME", "PATH", "BASH_ENV"), strict=True):
        assert refused["is_error"] and name in refused["content"]
    ran = json.loads(results[3]["content"])
    out = ran["stdout"].strip()
    assert out.startswith("mode=f skill=guide out=") and out.endswith("/out path=" + SAFE_PATH)
