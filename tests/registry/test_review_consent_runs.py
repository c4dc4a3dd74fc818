"""Whole runs of a reviewed organisation skill against the fake Anthropic server (real SDK, real
sandbox): the reviewed command runs without asking under the reviewer's consent, an unreviewed
command that quotes the instructions is refused in plain words, any other call asks, and every
decision is recorded with what decided it. A person's own arguments stay theirs after a reload
and in their export."""

from __future__ import annotations

import re

import pytest
from asgiref.sync import sync_to_async
from django.test import Client
from django.urls import reverse

from skills_app.models import (
    Approval,
    Conversation,
    PermissionDecision,
    PermissionRule,
    Run,
    SkillReview,
)
from skills_app.visibility import forget
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import run_turn, use_fake_model
from tests.support.review_helpers import GREET_MARKER, publish

pytestmark = pytest.mark.django_db(transaction=True)

REFUSAL = (
    "this command quotes the skill's instructions and is not among its reviewed commands; "
    "ask a skill manager"
)


def _texts(request: dict) -> list[str]:
    last = request["messages"][-1]
    content = last["content"] if isinstance(last["content"], list) else []
    return [b.get("text", "") for b in content if b.get("type") == "text"]


def _results(request: dict) -> list[dict]:
    last = request["messages"][-1]
    content = last["content"] if isinstance(last["content"], list) else []
    return [b for b in content if b.get("type") == "tool_result"]


def follow(then: str | None = None):
    """A model that runs the body's command; then (optionally) one more command; then answers."""
    state = {"extra": then}

    def responder(request: dict) -> Reply:
        hidden = next((t for t in _texts(request) if t.startswith("Base directory")), None)
        if hidden is not None:
            command = re.search(r"```bash\n(.+?)\n```", hidden, re.S).group(1).strip()
            return Reply.tool_use("Bash", {"command": command}, text="Running the greeting.")
        results = _results(request)
        if results and state["extra"] is not None:
            command, state["extra"] = state["extra"], None
            return Reply.tool_use("Bash", {"command": command})
        content = results[0]["content"] if results else ""
        text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
        return Reply.text("Done: " + text.splitlines()[0] if text else "Done.")

    return responder


@pytest.fixture
def live(settings, fake_anthropic, skill_manager):
    use_fake_model(settings, fake_anthropic)
    settings.SKILLS_DIRS = []
    return publish(skill_manager)


def _bash_results(fake) -> list[dict]:
    found = []
    for request in fake.requests:
        found += _results(request)
    return found


async def test_the_reviewed_command_runs_without_asking_under_the_reviewers_consent(
    live, fake_anthropic, alice
):
    conversation = await Conversation.objects.acreate(owner=alice, title="greet")
    fake_anthropic.set_responder(follow())
    # answer="deny": any approval would deny the call, so a greeting proves nobody was asked.
    run = await run_turn(conversation, "/org-greet Ada Lovelace", alice, answer="deny")
    assert run.status == Run.DONE
    assert not await Approval.objects.filter(run=run).aexists()
    results = _bash_results(fake_anthropic)
    assert results and "Hello, Ada Lovelace! Have a fine day." in str(results[0]["content"])
    decision = await PermissionDecision.objects.select_related("review").aget(
        conversation=conversation, tool="Bash"
    )
    assert decision.decision == "allow" and decision.source == "review"
    assert decision.reason.startswith("allowed by the review of org-greet v1 by mona: ")
    assert decision.reviewer_name == "mona"
    assert decision.review.action == SkillReview.APPROVED and decision.review.version_id == live.pk
    assert "Ada Lovelace" in decision.call_text


async def test_an_unreviewed_command_quoting_the_instructions_is_refused_in_plain_words(
    live, fake_anthropic, alice
):
    conversation = await Conversation.objects.acreate(owner=alice, title="greet")
    fake_anthropic.set_responder(follow(then=f"echo '{GREET_MARKER}' > out/copy.txt"))
    run = await run_turn(conversation, "/org-greet Grace", alice, answer="allow_once")
    assert run.status == Run.DONE
    assert not await Approval.objects.filter(run=run).aexists()  # never offered
    refused = _bash_results(fake_anthropic)[-1]
    assert refused.get("is_error") is True
    assert f"Permission denied: {REFUSAL}" in str(refused["content"])
    row = await PermissionDecision.objects.aget(conversation=conversation, decision="refused")
    assert row.source == "hidden" and row.skill == "org-greet" and row.reviewer_name == "mona"
    # The reviewer finds the attempt on the review page.
    client = Client()
    await sync_to_async(client.force_login)(await sync_to_async(lambda: live.uploaded_by)())
    page = await sync_to_async(client.get)(reverse("skill-review", args=[live.pk]))
    assert 'id="refusals"' in page.content.decode()


async def test_a_call_outside_the_manifest_without_hidden_text_asks_the_user(
    live, fake_anthropic, alice
):
    conversation = await Conversation.objects.acreate(owner=alice, title="greet")
    fake_anthropic.set_responder(follow(then="date +%Y"))
    run = await run_turn(conversation, "/org-greet Grace", alice, answer="deny")
    approval = await Approval.objects.aget(run=run)
    assert approval.call_text == "Bash(date +%Y)" and approval.status == Approval.DENY
    row = await PermissionDecision.objects.select_related("approver").aget(
        conversation=conversation, approval=approval
    )
    assert row.decision == "deny" and row.source == "user" and row.approver == alice


async def test_deny_rules_still_win_over_the_review(live, fake_anthropic, alice):
    await PermissionRule.objects.acreate(behavior="deny", rule_text="Bash(python3 *)")
    conversation = await Conversation.objects.acreate(owner=alice, title="greet")
    fake_anthropic.set_responder(follow())
    run = await run_turn(conversation, "/org-greet Ada", alice, answer="allow_once")
    assert run.status == Run.DONE
    denied = _bash_results(fake_anthropic)[0]
    assert denied.get("is_error") is True and "Bash(python3 *)" in str(denied["content"])
    row = await PermissionDecision.objects.aget(conversation=conversation, tool="Bash")
    assert row.decision == "deny" and row.source == "admin" and row.rule_text == "Bash(python3 *)"


async def test_a_persons_own_arguments_are_never_shown_to_them_as_withheld(
    live, fake_anthropic, alice
):
    words = "Ada Lovelace, Charles Babbage and everyone at the analytical engine society"
    # An admin ask rule for the skill: the person is asked about their own /org-greet line.
    await PermissionRule.objects.acreate(behavior="ask", rule_text="Skill(org-greet)")
    conversation = await Conversation.objects.acreate(owner=alice, title="greet")
    fake_anthropic.set_responder(follow())
    run = await run_turn(conversation, f"/org-greet {words}", alice, answer="allow_once")
    assert run.status == Run.DONE
    await sync_to_async(forget)(conversation.pk)
    client = Client()
    await sync_to_async(client.force_login)(alice)
    page = (
        await sync_to_async(client.get)(reverse("conversation", args=[conversation.pk]))
    ).content.decode()
    approval = page[page.index('id="approval-') :]
    approval = approval[: approval.index("</div>")]
    assert words in approval and "withheld" not in approval
    export = (
        await sync_to_async(client.get)(
            reverse("conversation-export-markdown", args=[conversation.pk])
        )
    ).content.decode()
    assert words in export
    assert GREET_MARKER not in export
    # Wherever any of the words appear, all of them do: none is cut by a placeholder.
    lines = [line for line in export.splitlines() if "analytical engine" in line]
    assert len(lines) >= 2 and all(words in line for line in lines)
