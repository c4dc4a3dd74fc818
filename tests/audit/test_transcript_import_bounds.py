"""Pathological transcript files: refused or skipped line by line with a reason, never a 500."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from skills_app.audit.transcript_io import TranscriptImportError, import_transcript
from skills_app.core.cc_transcript import MAX_LINE_DEPTH
from skills_app.models import Conversation, Message


def user(content):
    return json.dumps({"type": "user", "message": {"role": "user", "content": content}})


def nested(depth: int) -> str:
    """An assistant line nested `depth` levels deep (its own object is level 1), in a tool input."""
    inner = "[" * (depth - 5) + "1" + "]" * (depth - 5)
    return (
        '{"type": "assistant", "message": {"id": "m1", "role": "assistant", "content": '
        f'[{{"type": "tool_use", "id": "t1", "name": "Bash", "input": {{"x": {inner}}}}}]}}}}'
    )


@pytest.mark.django_db
def test_a_file_of_a_hundred_thousand_brackets_is_refused_saying_what_to_do(client, bob):
    client.force_login(bob)
    upload = SimpleUploadedFile("t.jsonl", b"[" * 100_000)
    response = client.post(reverse("transcript-import"), {"file": upload})
    page = response.content.decode()
    assert response.status_code == 400
    assert f"line 1: JSON nested more than {MAX_LINE_DEPTH} levels deep" in page
    assert "one JSON object per line" in page
    assert not Conversation.objects.filter(owner=bob).exists()
    assert not Message.objects.filter(conversation__owner=bob).exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("[" * 100_000, f"JSON nested more than {MAX_LINE_DEPTH} levels deep"),
        (nested(MAX_LINE_DEPTH + 1), f"JSON nested more than {MAX_LINE_DEPTH} levels deep"),
        (nested(5_000), f"JSON nested more than {MAX_LINE_DEPTH} levels deep"),
        (user([{"type": "text", "text": "x"}])[:-1] + ', "n": ' + "7" * 5_000 + "}", "digits"),
        (user("x")[:-1] + ', "n": NaN}', "NaN"),
        # Escapes in the JSON text, as a file holds them.
        (user("cafe").replace("cafe", "caf\\ud800"), "lone surrogate"),
        (user("ab").replace("ab", "a\\u0000b"), "NUL character"),
    ],
    ids=["brackets", "just-too-deep", "deep-tool-input", "huge-number", "nan", "surrogate", "nul"],
)
def test_a_pathological_line_is_skipped_with_its_reason_and_the_rest_imported(alice, bad, reason):
    data = "\n".join([user("first"), bad, user("last")]) + "\n"
    result = import_transcript(alice.pk, data)
    assert [s.line for s in result.skipped] == [2]
    assert reason in result.skipped[0].reason
    texts = [m.content for m in result.conversation.messages.order_by("seq")]
    assert texts == [[{"type": "text", "text": "first"}, {"type": "text", "text": "last"}]] or (
        texts == [[{"type": "text", "text": "first"}], [{"type": "text", "text": "last"}]]
    )


@pytest.mark.django_db
def test_a_tool_input_nested_as_deep_as_allowed_imports(alice):
    data = "\n".join([user("go"), nested(MAX_LINE_DEPTH)]) + "\n"
    result = import_transcript(alice.pk, data)
    assert result.skipped == ()
    call = result.conversation.messages.get(role="assistant", kind="tool_use").content[0]
    assert call["type"] == "tool_use" and call["id"] == "t1"


@pytest.mark.django_db
def test_a_file_of_only_pathological_lines_creates_nothing(alice):
    before = (Conversation.objects.count(), Message.objects.count())
    with pytest.raises(TranscriptImportError) as caught:
        import_transcript(alice.pk, nested(5_000) + "\n" + user("x")[:-1] + ', "n": NaN}\n')
    assert "No line of the file could be used" in str(caught.value)
    assert "one JSON object per line" in str(caught.value)
    assert (Conversation.objects.count(), Message.objects.count()) == before
