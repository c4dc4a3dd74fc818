from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from skills_app.chat.rendering import render_elicitation
from skills_app.core.transcript import StoredMessage
from skills_app.mcp import elicitations
from skills_app.models import Approval, Conversation, McpElicitation, Message, Run, RunEvent
from skills_app.runs import agent_setup, eventlog, store
from skills_app.runs.recovery import interrupt_orphaned_runs
from tests.support.fake_anthropic import validate_request

pytestmark = pytest.mark.django_db


def test_it_marks_runs_left_active_as_interrupted_and_answers_open_tool_uses(alice):
    conversation = Conversation.objects.create(owner=alice)
    run = Run.objects.create(conversation=conversation, status=Run.WAITING)
    store.append_message(conversation.pk, StoredMessage.text("user", "run ls"), run_id=run.pk)
    store.append_message(
        conversation.pk,
        StoredMessage(
            role="assistant",
            kind="tool_use",
            content=(
                {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}},
            ),
        ),
        run_id=run.pk,
    )
    Approval.objects.create(conversation=conversation, run=run, tool="Bash", call_text="Bash(ls)")
    done = Run.objects.create(conversation=conversation, status=Run.DONE)

    assert interrupt_orphaned_runs() == 1

    run.refresh_from_db()
    done.refresh_from_db()
    assert run.status == Run.INTERRUPTED and "Retry" in run.error
    assert done.status == Run.DONE
    assert Approval.objects.get(run=run).status == Approval.CANCELLED
    last = Message.objects.filter(conversation=conversation).order_by("-seq")[:2]
    assert last[0].kind == "error" and last[0].to_model is False
    assert last[1].content[0]["tool_use_id"] == "toolu_1" and last[1].content[0]["is_error"]
    # The interrupted turn is left out until the user retries it; then it goes back whole,
    # its tool call answered as interrupted, and the API accepts the request.
    assert agent_setup.build_request(conversation).as_kwargs()["messages"] == []
    assert last[0].meta["retry"] is True
    assert store.prepare_retry(conversation.pk)
    request = agent_setup.build_request(conversation).as_kwargs()
    assert request["messages"][-1]["content"][0]["tool_use_id"] == "toolu_1"
    assert validate_request(request) is None


def test_bootstrap_recovers_runs_on_start(alice, admin_user):
    conversation = Conversation.objects.create(owner=alice)
    Run.objects.create(conversation=conversation, status=Run.RUNNING)
    out = io.StringIO()
    call_command("bootstrap", stdout=out)
    assert "Marked 1 run(s)" in out.getvalue()
    assert Run.objects.get().status == Run.INTERRUPTED


def test_an_mcp_servers_question_of_an_interrupted_run_is_closed_and_its_card_says_so(
    alice, client
):
    conversation = Conversation.objects.create(owner=alice)
    run = Run.objects.create(conversation=conversation, status=Run.RUNNING)
    question = McpElicitation.objects.create(
        conversation=conversation,
        run=run,
        server="toy",
        message="Which colour should the report use?",
        fields=[{"name": "colour", "kind": "string", "required": True}],
    )
    eventlog.append_event(conversation.pk, elicitations.asked_event(question), run_id=run.pk)
    client.force_login(alice)
    page = client.get(f"/c/{conversation.pk}/").content.decode()
    assert 'data-status="pending"' in page  # the card offers its form while the run lives

    assert interrupt_orphaned_runs() == 1

    question.refresh_from_db()
    assert question.status == McpElicitation.Status.CANCEL
    assert question.why == elicitations.INTERRUPTED and question.answered_at is not None
    answered = RunEvent.objects.get(conversation=conversation, type="elicitation.answered")
    assert (answered.data["elicitation_id"], answered.data["status"]) == (question.pk, "cancel")
    # An open tab swaps the card for its outcome, with why; a reload offers no form any more.
    card = render_elicitation(conversation.pk, answered.data, can_inspect=False)
    assert 'data-status="cancel"' in card and "cancelled</strong>: the run was interrupted" in card
    page = client.get(f"/c/{conversation.pk}/").content.decode()
    assert 'data-status="pending"' not in page
    with pytest.raises(elicitations.ElicitationError, match="already answered"):
        elicitations.answer_elicitation(question.pk, conversation.pk, alice.pk, "decline", {})
