"""The files a message carries: claimed in the transaction that stores the user's message.

The chat uploads files first (`chat.attachments`: pending Attachment rows, bytes in in/); the
message that sends them stores one more user row, right before the prompt, whose content the
model reads: image and document blocks for what the API takes inline, and a text block listing
every file's workspace path. People see the row as chips (`meta["attachments"]`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from skills_app import sent_texts
from skills_app.core import attachments as core
from skills_app.core.attachments import AttachedFile, AttachmentError
from skills_app.core.tools.workspace import WorkspaceFileError, open_workspace_file
from skills_app.core.transcript import StoredMessage
from skills_app.models import Attachment
from skills_app.workspaces import workspace_for

KIND = "attachments"

__all__ = ["KIND", "AttachmentError", "attachment_ids", "mark_sent", "stored_message"]


def attachment_ids(value: Any) -> list[int]:
    """The ids a form sent (one value, a list, or none); AttachmentError for anything else."""
    if value is None or value == "":
        return []
    values = value if isinstance(value, list) else [value]
    ids: list[int] = []
    for item in values:
        if isinstance(item, bool):
            raise AttachmentError("An attachment id must be a number.")
        if isinstance(item, int):
            ids.append(item)
        elif isinstance(item, str) and item.isascii() and item.isdigit() and len(item) <= 18:
            ids.append(int(item))
        else:
            raise AttachmentError("An attachment id must be a number.")
    if len(ids) > settings.ATTACHMENT_MAX_FILES:
        raise AttachmentError(
            f"At most {settings.ATTACHMENT_MAX_FILES} files can be sent with one message."
        )
    return list(dict.fromkeys(ids))


def stored_message(
    conversation_id: int, user_id: int, ids: Iterable[int]
) -> tuple[StoredMessage | None, list[Attachment]]:
    """Claim the pending attachments and build the row the model reads them from.

    Call inside the transaction that stores the message. AttachmentError when an id is not a
    pending file of this person in this conversation, or a file changed since it was attached.
    """
    wanted = list(ids)
    if not wanted:
        return None, []
    rows = list(
        Attachment.objects.select_for_update().filter(
            pk__in=wanted, conversation_id=conversation_id, owner_id=user_id, message__isnull=True
        )
    )
    if len(rows) != len(wanted):
        raise AttachmentError(
            "One of the attached files is no longer waiting to be sent (it was sent or "
            "removed). Attach it again."
        )
    workspace = workspace_for(conversation_id)
    blocks: list[dict[str, Any]] = []
    files: list[AttachedFile] = []
    texts: list[str] = []
    for row in rows:
        try:
            with open_workspace_file(workspace, row.path) as handle:
                data = handle.read(row.size + 1)
        except WorkspaceFileError:
            data = b""
        if hashlib.sha256(data).hexdigest() != row.sha256:
            raise AttachmentError(
                f"{row.name} changed in the workspace after you attached it. Remove it and "
                "attach it again."
            )
        text = sent_texts.file_text(data)
        if text is not None:
            texts.append(text)
        file = AttachedFile(name=row.name, path=row.path, media_type=row.media_type, size=row.size)
        block = core.content_block(file, data)
        if block is not None:
            blocks.append(block)
        files.append(file)
    blocks.append({"type": "text", "text": core.model_note(files)})
    # The files' text is theirs: no one else's MCP call may carry it (`sent_texts`).
    sent_texts.remember(user_id, texts)
    message = StoredMessage(
        role="user",
        content=tuple(blocks),
        kind=KIND,
        meta={KIND: [row.info() for row in rows]},
    )
    return message, rows


def mark_sent(rows: list[Attachment], message_id: int) -> None:
    """Link the claimed files to the stored row (same transaction as `stored_message`)."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("mark_sent belongs inside the transaction that stores the message")
    Attachment.objects.filter(pk__in=[r.pk for r in rows]).update(
        message_id=message_id, sent_at=timezone.now()
    )
