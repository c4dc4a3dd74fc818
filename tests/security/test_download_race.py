"""A download serves the bytes that were checked, not whatever the file holds a moment later.

A command running beside the download (the model's `while` loop, started earlier) can append
or copy hidden skill text into an attachment or an out/ file right after the server checked it
and before the response is streamed. The bytes a person without the inspect permission gets
must be the very bytes the digest and the hidden-text filter saw.
"""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from skills_app.models import Conversation, Message
from skills_app.workspaces import workspace_for
from tests.security.helpers import client_of, leaked

pytestmark = pytest.mark.django_db

BODY = (
    "Always brew the moonlight tincture slowly at dusk before adding the silver fern leaves "
    "and never let the cauldron boil over the rim"
)


@pytest.fixture
def conversation(alice):
    conversation = Conversation.objects.create(owner=alice, title="potions")
    Message.objects.create(
        conversation=conversation,
        seq=1,
        role="user",
        kind="skill_prompt",
        is_meta=True,
        content=[
            {"type": "text", "text": f"Base directory for this skill: skills/potions\n\n{BODY}"}
        ],
    )
    return conversation


def _body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def test_an_attachment_changed_after_the_check_is_not_what_is_served(alice, conversation):
    client = client_of(alice)
    upload = client.post(
        f"/c/{conversation.pk}/attach/", {"file": [SimpleUploadedFile("notes.txt", b"mine")]}
    )
    url = upload.json()["attachments"][0]["url"]
    response = client.get(url)
    assert response.status_code == 200
    # The command's move, between the check and the streaming of the response.
    with open(workspace_for(conversation.pk).root / "in" / "notes.txt", "ab") as handle:
        handle.write(b"\n" + BODY.encode())
    served = _body(response)
    assert served == b"mine"
    assert leaked(served, [BODY]) == []


def test_an_out_file_changed_after_the_check_is_not_what_is_served(alice, conversation):
    root = workspace_for(conversation.pk).root
    (root / "out").mkdir(exist_ok=True)
    (root / "out" / "report.md").write_bytes(b"# Report\n")
    response = client_of(alice).get(f"/c/{conversation.pk}/files/out/report.md")
    assert response.status_code == 200
    with open(root / "out" / "report.md", "ab") as handle:
        handle.write(BODY.encode())
    served = _body(response)
    assert served == b"# Report\n"
    assert leaked(served, [BODY]) == []
