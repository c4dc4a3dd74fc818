"""Attached files a command changes afterwards: never read whole, never removed through a link.

A command can replace an attachment in in/ with a huge (sparse) file, or swap in/ itself for a
link to somewhere else while the server checks the file. Removing or downloading the attachment
must then neither read gigabytes (the server's one thread for sync views, and its memory) nor
delete anything outside the conversation's in/ folder.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from skills_app.workspaces import workspace_for
from tests.security.helpers import client_of

pytestmark = pytest.mark.django_db

GROWN_BYTES = 256 * 1024 * 1024
# A request that checks a small attachment reads templates, the database and the file itself:
# far less than this. One that reads the grown file reads all of it.
READ_BUDGET = 16 * 1024 * 1024


def _bytes_read() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def _attach(client, conversation_id: int, name: str, data: bytes) -> dict:
    response = client.post(
        f"/c/{conversation_id}/attach/", {"file": [SimpleUploadedFile(name, data)]}
    )
    assert response.status_code == 200, response.content
    return response.json()["attachments"][0]


@pytest.fixture
def conversation(alice):
    from skills_app.models import Conversation

    return Conversation.objects.create(owner=alice, title="Files")


@pytest.mark.parametrize("how", ["download", "remove"])
def test_an_attachment_grown_by_a_command_is_not_read_whole(alice, conversation, how):
    client = client_of(alice)
    chip = _attach(client, conversation.pk, "notes.txt", b"mine")
    target = workspace_for(conversation.pk).root / "in" / "notes.txt"
    os.truncate(target, GROWN_BYTES)  # sparse: costs the disk nothing, a reader everything
    before = _bytes_read()
    if how == "download":
        response = client.get(chip["url"])
        assert response.status_code == 409
    else:
        response = client.post(chip["url"] + "remove/")
        assert response.status_code == 200
        assert target.exists()  # not the file that was attached: left alone
    assert _bytes_read() - before < READ_BUDGET


def test_removing_never_deletes_through_a_folder_swapped_during_the_check(tmp_path):
    from skills_app.core.tools.workspace import Workspace

    workspace = Workspace(tmp_path / "ws")
    path = workspace.save_input("notes.txt", b"mine")
    victim = tmp_path / "elsewhere"
    victim.mkdir()
    (victim / "notes.txt").write_bytes(b"mine")  # the same bytes: the check would pass there
    digest = hashlib.sha256(b"mine").hexdigest()

    def check(handle) -> bool:
        # The command's move, at the worst moment: in/ becomes a link to another folder.
        os.rename(workspace.root / "in", workspace.root / "in-old")
        os.symlink(victim, workspace.root / "in")
        return hashlib.sha256(handle.read()).hexdigest() == digest

    assert workspace.remove_input(path, size=4, check=check) is True
    assert (victim / "notes.txt").read_bytes() == b"mine"
    assert not (workspace.root / "in-old" / "notes.txt").exists()  # the real one went


def test_an_upload_is_copied_to_in_without_holding_the_files_in_memory(alice, conversation):
    import tracemalloc

    from django.test import RequestFactory

    from skills_app.chat import attachments

    size = 6 * 1024 * 1024  # each over Django's in-memory limit: parsed into a temporary file
    files = [SimpleUploadedFile(f"part{i}.bin", bytes([i]) * size) for i in range(2)]
    request = RequestFactory().post(f"/c/{conversation.pk}/attach/", {"file": files})
    request.user = alice
    tracemalloc.start()
    try:
        response = attachments.upload(request, conversation.pk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert response.status_code == 200, response.content
    root = workspace_for(conversation.pk).root
    assert (root / "in" / "part1.bin").read_bytes() == bytes([1]) * size
    # Copied in chunks: far less than one file at a time, let alone all of them.
    assert peak < size // 2, f"the upload held {peak} bytes in memory"
