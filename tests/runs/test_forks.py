from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async

from skills_app.audit import requests as audit
from skills_app.models import Conversation, ModelCall, PermissionRule, Run, SkillInvocation
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import accepted, rows, run_turn, use_fake_model, write_skills

pytestmark = pytest.mark.django_db(transaction=True)

FORKER = """\
---
description: Researches a question on its own and reports back.
context: fork
agent: Explore
model: claude-sonnet-4-6
---
FORK-BODY-MARKER: look into $ARGUMENTS and answer in one line.
"""


def is_child(request):
    return "FORK-BODY-MARKER" in json.dumps(request["messages"][0])


@pytest.fixture
def fake(settings, fake_anthropic, tmp_path):
    use_fake_model(settings, fake_anthropic)
    root = write_skills(tmp_path / "skills", {"forker": FORKER})
    settings.SKILLS_DIRS = [root]
    # A skill's `model:` applies only when the person's policy offers it (issue #26).
    settings.ANTHROPIC_MODELS = [*settings.ANTHROPIC_MODELS, "claude-sonnet-4-6"]
    PermissionRule.objects.create(behavior="allow", rule_text="Skill")
    return fake_anthropic


@pytest.fixture
def conversation(alice):
    return Conversation.objects.create(owner=alice, title="fork")


async def test_a_forked_skill_runs_as_a_subagent_and_returns_only_its_final_text(
    fake, conversation, alice
):
    def respond(request):
        if is_child(request):
            if len(request["messages"]) == 1:
                return Reply.tool_use("Glob", {"pattern": "*"}, text="Looking around.")
            return Reply.text("Subagent final answer: 42")
        if request["messages"][-1]["role"] == "user" and any(
            b.get("type") == "tool_result" for b in request["messages"][-1]["content"]
        ):
            return Reply.text("Parent done.")
        return Reply.tool_use("Skill", {"skill": "forker", "args": "the meaning"})

    fake.set_responder(respond)
    run = await run_turn(conversation, "research this", alice)
    assert run.status == Run.DONE
    sent = accepted(fake)
    parent = [r for r in sent if not is_child(r)]
    child = [r for r in sent if is_child(r)]
    assert len(parent) == 2 and len(child) == 2
    result = parent[1]["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["content"] == "Subagent final answer: 42"
    assert all("FORK-BODY-MARKER" not in json.dumps(r) for r in parent)
    # The subagent: fresh history, its own model, a read-only preset, no nested Skill tool use.
    assert "look into the meaning" in child[0]["messages"][0]["content"][0]["text"]
    assert child[0]["model"] == "claude-sonnet-4-6" and parent[1]["model"] != "claude-sonnet-4-6"
    assert {t["name"] for t in child[0]["tools"]} >= {"Read", "Glob", "Grep"}
    assert "Bash" not in {t["name"] for t in child[0]["tools"]}
    assert "subagent" in child[0].system_text
    sub = await Run.objects.aget(parent=run)
    assert sub.status == Run.DONE and sub.model_calls == 2
    stored = await sync_to_async(rows)(conversation)
    child_rows = [m for m in stored if m.meta.get("subagent_run") == sub.pk]
    assert child_rows and all(m.to_model is False for m in child_rows)
    assert child_rows[0].is_meta is True  # the rendered body stays hidden
    invocation = await SkillInvocation.objects.aget(conversation=conversation, skill="forker")
    assert "FORK-BODY-MARKER" in invocation.injected_text
    assert [m.kind for m in stored if m.kind == "skill_status"] == ["skill_status"]


async def test_a_forked_slash_command_shows_the_result_as_a_visible_message(
    fake, conversation, alice
):
    fake.set_responder(
        lambda r: (
            Reply.text("Short answer from the subagent.") if is_child(r) else Reply.text("Thanks!")
        )
    )
    run = await run_turn(conversation, "/forker tides", alice)
    assert run.status == Run.DONE
    stored = await sync_to_async(rows)(conversation)
    result = next(m for m in stored if m.meta.get("subagent_result"))
    assert result.is_meta is False and result.to_model is True
    assert "Short answer from the subagent." in result.content[0]["text"]
    parent = [r for r in accepted(fake) if not is_child(r)]
    assert "Short answer from the subagent." in json.dumps(parent[0]["messages"])
    assert "FORK-BODY-MARKER" not in json.dumps(parent[0])


async def test_a_subagent_cannot_fork_again(fake, conversation, alice):
    def respond(request):
        if is_child(request):
            if len(request["messages"]) == 1:
                return Reply.tool_use("Skill", {"skill": "forker"})
            return Reply.text("could not nest")
        if len(request["messages"]) == 1:
            return Reply.tool_use("Skill", {"skill": "forker"})
        return Reply.text("ok")

    fake.set_responder(respond)
    run = await run_turn(conversation, "go", alice)
    child = [r for r in accepted(fake) if is_child(r)]
    # Inside its subagent the skill is an ordinary inline skill: invoking it again delivers
    # its instructions there and starts no second subagent.
    nested = child[1]["messages"][-1]["content"][0]
    assert nested["content"] == "Launching skill: forker" and "is_error" not in nested
    assert await Run.objects.filter(conversation=conversation).acount() == 2
    assert await Run.objects.filter(parent=run).acount() == 1
    # A subagent is offered no forked skill, not even its own, in its catalog.
    catalog = next(t for t in child[0]["tools"] if t["name"] == "Skill")["description"]
    assert '"forker"' not in catalog


async def test_a_subagents_requests_are_captured_as_sent(fake, conversation, alice):
    """Its messages are not the conversation's model-bound rows: captured verbatim, verified."""

    def respond(request):
        if is_child(request):
            return Reply.text("Subagent final answer: 42")
        if any(b.get("type") == "tool_result" for b in request["messages"][-1]["content"]):
            return Reply.text("Parent done.")
        return Reply.tool_use("Skill", {"skill": "forker", "args": "the meaning"})

    fake.set_responder(respond)
    run = await run_turn(conversation, "research this", alice)
    sub = await Run.objects.aget(parent=run)
    child_call = await ModelCall.objects.aget(run=sub)
    assert child_call.messages is not None and child_call.model == "claude-sonnet-4-6"
    views = await sync_to_async(audit.requests_for_run)(sub)
    child_sent = next(r for r in accepted(fake) if is_child(r))
    assert views[0].verified
    assert views[0].as_kwargs() == {k: v for k, v in child_sent.items() if k != "stream"}
    parent_calls = [c async for c in ModelCall.objects.filter(run=run)]
    assert all(c.messages is None for c in parent_calls)  # the parent's: rows, not copies
