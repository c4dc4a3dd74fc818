"""A conversation's rows: messages stored in order, read back, marked excluded, replaced or retried.

Beside it: the event log (`eventlog`), the streamed text it holds (`streamed_text`), and a
conversation's agent settings and rebuilt request (`agent_setup`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.db.models import Max

from skills_app.core.transcript import (
    StoredMessage,
    editable,
    ends_with_user,
    exclude_turn,
    regenerate_start,
    replace_rows,
    retry_turn,
    turn_start,
)
from skills_app.models import Conversation, Message, rows_with_ids
from skills_app.visibility import note_quoted_hidden


def stored_message(row: Message) -> StoredMessage:
    return StoredMessage(
        role=row.role,
        content=tuple(row.content),
        kind=row.kind,
        is_meta=row.is_meta,
        to_model=row.to_model,
        meta=dict(row.meta or {}),
    )


def history(conversation: Conversation) -> list[StoredMessage]:
    # values_list skips model instantiation: this runs before every model call.
    fields = ("role", "content", "kind", "is_meta", "to_model", "meta")
    return [
        StoredMessage(
            role=role,
            content=tuple(content),
            kind=kind,
            is_meta=is_meta,
            to_model=to_model,
            meta=dict(meta or {}),
        )
        for role, content, kind, is_meta, to_model, meta in conversation.messages.order_by(
            "seq"
        ).values_list(*fields)
    ]


STOP_NOTE = "Stopped."


def stop_note() -> StoredMessage:
    """The row that says a run was stopped by the person (never sent to the model)."""
    return StoredMessage.text(
        "assistant", STOP_NOTE, kind="notice", to_model=False, meta={"code": "stopped"}
    )


def append_message(
    conversation_id: int,
    message: StoredMessage,
    *,
    run_id: int | None = None,
    invocation_id: int | None = None,
) -> Message:
    meta = dict(message.meta)
    # The model's prose is shown as written; an answer quoting hidden text is marked (and its
    # run) so the audit shows it. Checked before the transaction: it may read files.
    prose = message.plain_text if message.role == "assistant" and not message.is_meta else ""
    if prose and note_quoted_hidden(conversation_id, run_id, prose):
        meta["quoted_hidden"] = True
    with transaction.atomic():
        # Lock the conversation row so two writers never take the same seq.
        Conversation.objects.filter(pk=conversation_id).update(updated_at=_now())
        last = Message.objects.filter(conversation_id=conversation_id).aggregate(m=Max("seq"))["m"]
        return Message.objects.create(
            conversation_id=conversation_id,
            seq=(last or 0) + 1,
            role=message.role,
            content=list(message.content),
            kind=message.kind,
            is_meta=message.is_meta,
            to_model=message.to_model,
            meta=meta,
            run_id=run_id,
            invocation_id=invocation_id,
        )


def _store_meta(ids: list[int], changes: dict[int, StoredMessage]) -> list[int]:
    for index, row in changes.items():
        Message.objects.filter(pk=ids[index]).update(meta=row.meta)
    return [ids[index] for index in sorted(changes)]


def exclude_latest_turn(conversation_id: int, reason: str) -> list[int]:
    """Mark the latest turn's rows excluded (`transcript.exclude_turn`); the ids marked."""
    with transaction.atomic():
        ids, stored = rows_with_ids(conversation_id)
        return _store_meta(ids, exclude_turn(stored, turn_start(stored), reason))


def replace_latest(conversation_id: int, how: str, *, message_id: int | None = None) -> list[int]:
    """Mark a message and all after it (`how="edit"`) or the latest answer ("regenerate")
    replaced; the ids marked.

    ValueError saying why when there is nothing to replace, or `message_id` is not one of the
    person's messages still in the conversation (an edit names the message it changes).
    """
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().filter(pk=conversation_id).first()
        if conversation is None or conversation.deleted_at is not None:
            # A tab left open on it still connects: the rows stay as the audit keeps them.
            raise ValueError("This conversation was deleted; start a new one.")
        ids, stored = rows_with_ids(conversation_id)
        if how == "edit":
            start = ids.index(message_id) if message_id in ids else None
            if start is None or not editable(stored, start):
                raise ValueError(
                    "That message cannot be edited: it is not one of your messages in this "
                    "conversation, or it was replaced already."
                )
        else:
            start = regenerate_start(stored)
            if start is None:
                raise ValueError("There is no answer to regenerate (use Retry after an error).")
        changes = replace_rows(stored, start, how=how, at=_now().isoformat())
        return _store_meta(ids, changes)


def visible_ids(ids: Sequence[int]) -> list[int]:
    """The ids among `ids` of rows everyone may see (not hidden), in order."""
    shown = set(
        Message.objects.filter(pk__in=list(ids), is_meta=False).values_list("pk", flat=True)
    )
    return [pk for pk in ids if pk in shown]


def prepare_retry(conversation_id: int) -> list[int] | None:
    """Make the latest failed turn sendable again (`transcript.retry_turn`); the ids unmarked.

    None when there is nothing to retry: the latest turn was answered, or a newer one went on.
    """
    ids, stored = rows_with_ids(conversation_id)
    changes = retry_turn(stored)
    if changes:
        return _store_meta(ids, changes)
    return [] if ends_with_user(stored) else None


def keep_prompt_from_model(run_id: int) -> None:
    """Keep the user's message that started this run out of every later request."""
    Message.objects.filter(run_id=run_id, role="user", kind="text", is_meta=False).update(
        to_model=False
    )


def _now() -> Any:
    from django.utils import timezone

    return timezone.now()
