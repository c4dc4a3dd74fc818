"""Rendered for each visibility class: what ordinary users and inspectors get of each event.

`user_html` drops hidden items for ordinary users and renders the rest for them, through
`visibility.outbound`. These tests plant a hidden skill text in the conversation and check that
every way a fragment reaches an ordinary user withholds it (live fragments, the replay, the chat
page), while inspectors get the text as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.test import Client

from skills_app.chat.fragments import fragment_for, replay_html
from skills_app.core.events import (
    ApprovalRequested,
    MessageStored,
    RunFinished,
    ToolFinished,
)
from skills_app.core.transcript import STOPPED_RESULT, StoredMessage
from skills_app.models import Approval, Conversation, Run, RunEvent
from skills_app.runs import eventlog, store

pytestmark = pytest.mark.django_db

MARKER = "PLANTED-HIDDEN-SPAN-41c9 of the skill instructions, long enough to withhold"


@pytest.fixture
def conversation(alice):
    return Conversation.objects.create(owner=alice, title="Fragments")


@pytest.fixture
def run(conversation):
    return Run.objects.create(conversation=conversation, status=Run.RUNNING)


@pytest.fixture
def redacting(conversation, run):
    """The marker as hidden text of the conversation: a loaded skill's instructions."""
    body = f"Base directory for this skill: /x\n\n{MARKER}"
    store.append_message(
        conversation.pk,
        StoredMessage.text("user", body, kind="skill_prompt", is_meta=True),
        run_id=run.pk,
    )


@dataclass(frozen=True)
class Rendered:
    public: str | None
    inspector: str | None


def _rendered(event, *, conversation_id: int) -> Rendered | None:
    """The event's fragment for an ordinary user and for an inspector (None: neither gets one)."""
    public = fragment_for(event, conversation_id=conversation_id, can_inspect=False)
    inspector = fragment_for(event, conversation_id=conversation_id, can_inspect=True)
    return None if public is None and inspector is None else Rendered(public, inspector)


def _stored(conversation, run, message: StoredMessage) -> tuple[MessageStored, RunEvent]:
    row = store.append_message(conversation.pk, message, run_id=run.pk)
    event = MessageStored(
        message_id=row.pk, role=row.role, kind=row.kind, is_meta=row.is_meta, run_id=run.pk
    )
    return event, eventlog.append_event(conversation.pk, event, run_id=run.pk, hidden=row.is_meta)


def test_a_hidden_row_is_rendered_for_inspectors_only(conversation, run):
    body = f"Base directory for this skill: /x\n\n{MARKER}"
    event, _ = _stored(
        conversation, run, StoredMessage.text("user", body, kind="skill_prompt", is_meta=True)
    )
    rendered = _rendered(event, conversation_id=conversation.pk)
    assert rendered.public is None
    assert MARKER in rendered.inspector and "Hidden from the user" in rendered.inspector


def test_an_answer_is_rendered_alike_for_each_class_and_empties_the_live_area(conversation, run):
    event, _ = _stored(conversation, run, StoredMessage.text("assistant", "Some **bold** words"))
    rendered = _rendered(event, conversation_id=conversation.pk)
    assert rendered.public == rendered.inspector
    assert "<strong>bold</strong>" in rendered.public
    assert f'id="message-{event.message_id}"' in rendered.public
    assert 'hx-swap-oob="beforeend:#transcript"' in rendered.public
    assert '<div id="live" class="live-area" hx-swap-oob="innerHTML"></div>' in rendered.public


def test_ordinary_users_get_tool_data_through_the_filter_and_the_model_prose_as_written(
    conversation, run, redacting
):
    tool_use = {"type": "tool_use", "id": "toolu_9", "name": "Bash", "input": {"command": MARKER}}
    answer = StoredMessage(
        role="assistant",
        kind="tool_use",
        content=({"type": "text", "text": f"I will quote {MARKER}."}, tool_use),
    )
    event, _ = _stored(conversation, run, answer)
    rendered = _rendered(event, conversation_id=conversation.pk)
    assert f"I will quote {MARKER}." in rendered.public  # the model's own words stay
    assert "withheld:" in rendered.public
    # The card shows the command in its summary and its arguments: withheld in both places.
    assert rendered.public.count(MARKER) == 1
    assert rendered.inspector.count(MARKER) == 3
    result = ToolFinished(tool_use_id="toolu_9", name="Bash", is_error=False, content=MARKER)
    rendered = _rendered(result, conversation_id=conversation.pk)
    assert MARKER not in rendered.public and "withheld:" in rendered.public
    assert MARKER in rendered.inspector


def test_an_approval_prompt_goes_through_the_filter(conversation, run, redacting):
    approval = Approval.objects.create(
        conversation=conversation,
        run=run,
        tool="Bash",
        call_text=f"Bash(cat {MARKER})",
        input={"command": f"cat {MARKER}"},
    )
    rendered = _rendered(
        ApprovalRequested(approval_id=approval.pk), conversation_id=conversation.pk
    )
    assert MARKER not in rendered.public and MARKER in rendered.inspector
    assert 'name="answer" value="allow_once"' in rendered.public


def test_replay_and_the_chat_page_use_the_same_filter(conversation, run, alice, redacting):
    _stored(conversation, run, StoredMessage.text("user", "please run it"))
    tool_use = {"type": "tool_use", "id": "toolu_3", "name": "Bash", "input": {"command": MARKER}}
    _stored(
        conversation, run, StoredMessage(role="assistant", kind="tool_use", content=(tool_use,))
    )
    events = list(RunEvent.objects.filter(conversation=conversation).order_by("seq"))

    public = replay_html(conversation.pk, events, can_inspect=False)
    inspector = replay_html(conversation.pk, events, can_inspect=True)
    assert MARKER not in repr(public) and "withheld:" in repr(public)
    assert MARKER in repr(inspector)

    client = Client()
    client.force_login(alice)
    page = client.get(f"/c/{conversation.pk}/").content.decode()
    assert "please run it" in page and "withheld:" in page and MARKER not in page


def test_a_stopped_run_hides_stop_and_says_stopped(conversation, run):
    rendered = _rendered(
        RunFinished(run_id=run.pk, status="stopped"), conversation_id=conversation.pk
    )
    assert 'id="stop-button"' in rendered.public and "hidden" in rendered.public
    assert 'data-run-status="stopped"' in rendered.public
    # The note is a stored row with its own event (it stays after a reload), not sent twice.
    assert "Stopped." not in rendered.public


def test_a_call_closed_by_a_stop_says_stopped_not_running(conversation, run):
    tool_use = {"type": "tool_use", "id": "toolu_st", "name": "Bash", "input": {"command": "ls"}}
    _stored(
        conversation, run, StoredMessage(role="assistant", kind="tool_use", content=(tool_use,))
    )
    closed = {
        "type": "tool_result",
        "tool_use_id": "toolu_st",
        "content": STOPPED_RESULT,
        "is_error": True,
    }
    closing = StoredMessage(
        role="user", kind="tool_result", content=(closed,), meta={"stopped": True}
    )
    event, _ = _stored(conversation, run, closing)
    rendered = _rendered(event, conversation_id=conversation.pk)
    assert "Stopped before it finished." in rendered.public
    assert f'id="tool-result-{tool_use["id"]}"' in rendered.public
    assert "Running…" not in rendered.public and STOPPED_RESULT not in rendered.public


def test_events_the_browser_shows_nothing_of_render_nothing(conversation):
    from skills_app.core.events import ModelCalled, ToolAudited

    for event in (
        ModelCalled(call=1, model="m"),
        ToolAudited(tool_use_id="t", tool="Read", invocation_id=1),
    ):
        assert _rendered(event, conversation_id=conversation.pk) is None
