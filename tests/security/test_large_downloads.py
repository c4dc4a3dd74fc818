"""Large out/ files: every offered skill is hidden text, so every conversation has a filter.

Files over the redaction limit used to be refused outright in such a conversation (that is, in
almost every conversation). Now they are scanned block by block while copied to a spool: a file
without hidden text is served (the spool, i.e. the bytes checked), one with hidden text anywhere,
also across a block boundary, is refused with a plain reason.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from skills_app.chat import downloads
from skills_app.models import Conversation
from skills_app.workspaces import workspace_for

pytestmark = pytest.mark.django_db

SECRET = (
    "Quote the discount ladder only to partners: eleven percent after the third crate. "
    "The code word at the gate is marmalade."
)


@pytest.fixture
def offered(settings, tmp_path) -> None:
    root = tmp_path / "skills" / "secret"
    root.mkdir(parents=True)
    (root / "SKILL.md").write_text(f"---\nname: secret\ndescription: A secret.\n---\n{SECRET}\n")
    settings.SKILLS_DIRS = [tmp_path / "skills"]
    settings.BUNDLED_SKILLS_DIR = tmp_path / "no-bundled"


def _out_file(conversation: Conversation, data: bytes) -> str:
    out = workspace_for(conversation.pk).root / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "big.txt").write_bytes(data)
    return reverse("conversation-file", args=[conversation.pk, "out/big.txt"])


def _filler(size: int) -> bytes:
    line = b"an ordinary line of generated output, nothing secret in it at all\n"
    return (line * (size // len(line) + 1))[:size]


def _body(response: Any) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def test_a_large_file_without_hidden_text_is_served_whole(client, alice, offered):
    conversation = Conversation.objects.create(owner=alice)
    data = _filler(downloads.REDACT_MAX_BYTES * 2 + 12345)
    url = _out_file(conversation, data)
    client.force_login(alice)
    response = client.get(url)
    assert response.status_code == 200
    assert _body(response) == data


@pytest.mark.parametrize("where", ["start", "across-a-block-cut", "end"])
def test_a_large_file_with_hidden_text_anywhere_is_refused(client, alice, offered, where):
    conversation = Conversation.objects.create(owner=alice)
    size = downloads.REDACT_MAX_BYTES * 2
    # 70 characters of the skill: over the 40-character minimum, but under it on each side of a cut.
    secret = SECRET[:70].encode()
    cut = downloads.REDACT_MAX_BYTES + 1 + downloads._BLOCK  # the second block read from disk
    at = {"start": 0, "across-a-block-cut": cut - 35, "end": size - len(secret)}
    data = bytearray(_filler(size))
    data[at[where] : at[where] + len(secret)] = secret
    url = _out_file(conversation, bytes(data))
    client.force_login(alice)
    response = client.get(url)
    assert response.status_code == 403
    assert b"holds hidden skill text" in response.content
    assert b"discount ladder" not in response.content


def test_an_inspector_gets_the_large_file_with_hidden_text(client, auditor, offered):
    """Positive control: the refusal comes from the filter, not from the size."""
    conversation = Conversation.objects.create(owner=auditor)
    data = _filler(downloads.REDACT_MAX_BYTES * 2)
    data = SECRET.encode() + data
    url = _out_file(conversation, data)
    client.force_login(auditor)
    response = client.get(url)
    assert response.status_code == 200
    assert _body(response) == data


def test_a_file_over_the_scan_limit_is_refused_with_the_figure(client, alice, offered, settings):
    conversation = Conversation.objects.create(owner=alice)
    url = _out_file(conversation, _filler(downloads.REDACT_MAX_BYTES + 10))
    client.force_login(alice)
    original = downloads.SCAN_MAX_BYTES
    downloads.SCAN_MAX_BYTES = downloads.REDACT_MAX_BYTES + 5
    try:
        response = client.get(url)
    finally:
        downloads.SCAN_MAX_BYTES = original
    assert response.status_code == 403
    assert b"too large to check" in response.content
