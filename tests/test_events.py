"""The typed events: one class per dotted name, JSON both ways, a consumer handler for each."""

from __future__ import annotations

import pytest

from skills_app.chat.consumers import ConversationConsumer
from skills_app.core.events import (
    EVENT_TYPES,
    ApprovalRequested,
    EventDataError,
    HookRan,
    MessageStored,
    ModelCalled,
    TextDelta,
    ToolFinished,
    event_from,
    event_type,
)

EXAMPLES = {
    "model.call": ModelCalled(call=2, model="claude-opus-4-8", skill="pdf", request=object()),
    "tool.result": ToolFinished(
        tool_use_id="toolu_1", name="Bash", is_error=False, content="ok", artifacts=("out/a.md",)
    ),
    "message.stored": MessageStored(message_id=7, role="assistant", kind="text", seq=3, run_id=2),
    "audit.hook": HookRan({"event": "PreToolUse", "skill": "pdf", "ran": True}),
    "text.delta": TextDelta(index=1, text="héllo", run_id=4, call=2, offset=10),
}


@pytest.mark.parametrize("name", sorted(EVENT_TYPES))
def test_every_event_type_has_a_handler_in_the_consumer(name):
    # Channels calls the handler named after the group message's type; a missing one would
    # end the consumer (and the tab's live view) with "No handler for message type".
    handler = getattr(ConversationConsumer, name.replace(".", "_"), None)
    assert callable(handler), f"ConversationConsumer has no handler for {name!r}"


def test_every_class_is_registered_under_its_own_dotted_name():
    for name, cls in EVENT_TYPES.items():
        assert cls.type == name and "." in name


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_an_event_survives_its_json(name):
    event = EXAMPLES[name]
    back = event_from(name, event.data())
    assert back == event
    assert back.data() == event.data()


def test_the_request_of_a_model_call_is_not_part_of_its_data():
    assert EXAMPLES["model.call"].data() == {"call": 2, "model": "claude-opus-4-8", "skill": "pdf"}


def test_the_old_message_name_reads_as_message_stored():
    event = event_from("message", {"message_id": 1, "role": "user", "kind": "text"})
    assert isinstance(event, MessageStored) and event.type == "message.stored"
    assert event_type("message") is MessageStored


def test_an_unknown_type_is_refused_by_name():
    with pytest.raises(EventDataError, match="unknown event type 'run.event'"):
        event_type("run.event")


def test_data_missing_a_required_field_says_which():
    with pytest.raises(EventDataError, match="approval.requested event needs 'approval_id'"):
        event_from("approval.requested", {"tool": "Bash"})


def test_keys_it_does_not_know_are_ignored():
    event = event_from("approval.requested", {"approval_id": 3, "extra": "x"})
    assert event == ApprovalRequested(approval_id=3)
