"""No server path reaches the chat (issue 29): tool cards, results and their full texts show
paths relative to the conversation's workspace, for every viewer."""

from __future__ import annotations

import pytest
from django.test import Client

from skills_app.chat import rendering
from skills_app.chat.approval_words import workspace_roots
from skills_app.models import Conversation, Message
from skills_app.visibility import outbound

pytestmark = pytest.mark.django_db


@pytest.fixture
def conversation(alice):
    return Conversation.objects.create(owner=alice)


def test_a_result_names_workspace_paths_relative_to_it(conversation):
    root = workspace_roots(conversation.pk)[0]
    data = {"content": f"{root}\n{root}/out/report.md written", "tool_use_id": "toolu_1"}
    shown = rendering.tool_result_context(
        conversation.pk, data, out=outbound(conversation.pk, can_inspect=False)
    )
    assert shown["content"] == ".\nout/report.md written"
    assert root not in str(shown)


def test_a_card_and_its_full_texts_show_no_server_path(alice, conversation):
    root = workspace_roots(conversation.pk)[0]
    call = {
        "type": "tool_use",
        "id": "toolu_paths",
        "name": "Bash",
        "input": {"command": f"wc -c {root}/out/notes.txt"},
    }
    Message.objects.create(
        conversation=conversation, seq=1, role="user", content=[{"type": "text", "text": "count"}]
    )
    Message.objects.create(
        conversation=conversation, seq=2, role="assistant", kind="tool_use", content=[call]
    )
    Message.objects.create(
        conversation=conversation,
        seq=3,
        role="user",
        kind="tool_result",
        content=[
            {
                "type": "tool_result",
                "tool_use_id": "toolu_paths",
                "content": f"42 {root}/out/notes.txt",
            }
        ],
    )
    client = Client()
    client.force_login(alice)
    page = client.get(f"/c/{conversation.pk}/").content.decode()
    assert "wc -c out/notes.txt" in page and "42 out/notes.txt" in page
    assert root not in page
    for part in ("input", "result"):
        text = client.get(f"/c/{conversation.pk}/tools/toolu_paths/{part}.txt").content.decode()
        assert "out/notes.txt" in text and root not in text
