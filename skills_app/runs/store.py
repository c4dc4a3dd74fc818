"""Rows in, rows out: messages, the event log and streamed text, and rebuilding the model request."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Max

from skills_app.core.agent import SYSTEM_PROMPT, AgentConfig, SkillProvider
from skills_app.core.events import (
    MessageStored,
    ModelCalled,
    TextSaved,
    ThinkingSaved,
    event_type,
)
from skills_app.core.events import RunEvent as CoreEvent
from skills_app.core.llm import ModelRequest
from skills_app.core.profiles import design_prompt
from skills_app.core.request import compose_request
from skills_app.core.skillfile import SkillSpec
from skills_app.core.tools import default_tools
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
from skills_app.models import Conversation, Message, Run, RunEvent
from skills_app.permissions.blocked import offered
from skills_app.registry.skills import skills_for_user
from skills_app.visibility import note_quoted_hidden

GROUP_PREFIX = "conversation-"


def group_name(conversation_id: int) -> str:
    """The channel-layer group every subscriber of a conversation joins."""
    return f"{GROUP_PREFIX}{conversation_id}"


class FilteredSkills:
    """Only the named skills of a provider (a conversation's `skill_filter`)."""

    def __init__(self, provider: SkillProvider, names: Sequence[str]) -> None:
        self.provider = provider
        self.names = frozenset(names)

    def get(self, name: str) -> SkillSpec | None:
        return self.provider.get(name) if name in self.names else None

    def skills(self) -> list[SkillSpec]:
        return [s for s in self.provider.skills() if s.name in self.names]


def skills_for_conversation(conversation: Conversation) -> SkillProvider:
    """The skills offered in a conversation: its owner's, narrowed by its skill filter.

    Skills a deny rule blocks are left out of the listing (the model's catalog), not out of
    lookups: naming one still gets the rule's refusal.
    """
    provider: SkillProvider = offered(skills_for_user(conversation.owner_id))
    if conversation.skill_filter:
        return FilteredSkills(provider, conversation.skill_filter)
    return provider


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


def base_prompt(conversation: Conversation) -> str:
    """The conversation's base system prompt: Skillscope's, or its profile's design prompt."""
    if conversation.base_prompt != Conversation.DESIGN_PROMPT:
        return SYSTEM_PROMPT
    # The workspace root as `Workspace.for_conversation` resolves it (without creating it).
    workdir = (Path(settings.WORKSPACE_ROOT) / str(conversation.pk)).resolve()
    return design_prompt(conversation.profile, str(workdir))


def agent_config(conversation: Conversation, *, model: str | None = None) -> AgentConfig:
    """The agent's settings for a conversation: its picks, else the configured defaults."""
    thinking = conversation.thinking
    return AgentConfig(
        system_prompt=base_prompt(conversation),
        skill_state=settings.SKILL_STATE_LIFETIME,
        tool_result_substitutions=settings.TOOL_RESULT_SUBSTITUTIONS,
        model=model or conversation.model or settings.ANTHROPIC_MODEL,
        max_tokens=settings.ANTHROPIC_MAX_TOKENS,
        max_turns=settings.AGENT_MAX_TURNS,
        session_id=str(conversation.session_id),
        catalog_budget=settings.SKILL_CATALOG_BUDGET,
        catalog_entry_cap=settings.SKILL_CATALOG_ENTRY_CAP,
        profile=conversation.profile,
        thinking=settings.ANTHROPIC_THINKING if thinking is None else thinking,
        effort=conversation.effort or settings.ANTHROPIC_EFFORT or None,
        prompt_caching=settings.ANTHROPIC_PROMPT_CACHING,
    )


def build_request(conversation: Conversation, *, model: str | None = None) -> ModelRequest:
    """The Anthropic request for this conversation, rebuilt from its stored rows."""
    return compose_request(
        history(conversation),
        tools=default_tools(),
        skills=skills_for_conversation(conversation),
        config=agent_config(conversation, model=model),
    )


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


def rows_with_ids(conversation_id: int) -> tuple[list[int], list[StoredMessage]]:
    """The conversation's rows in order, and their ids (same positions)."""
    rows = Message.objects.filter(conversation_id=conversation_id).order_by("seq")
    fields = ("pk", "role", "content", "kind", "is_meta", "to_model", "meta")
    ids: list[int] = []
    stored: list[StoredMessage] = []
    for pk, role, content, kind, is_meta, to_model, meta in rows.values_list(*fields):
        ids.append(pk)
        stored.append(
            StoredMessage(role, tuple(content), kind, is_meta, to_model, dict(meta or {}))
        )
    return ids, stored


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


def message_event(row: Message) -> dict[str, Any]:
    """The data of a `message.stored` event: which row was stored (the chat renders it)."""
    return MessageStored(
        message_id=row.pk,
        role=row.role,
        kind=row.kind,
        is_meta=row.is_meta,
        seq=row.seq,
        run_id=row.run_id,
    ).data()


def append_event(
    conversation_id: int,
    event: CoreEvent | str,
    data: dict[str, Any] | None = None,
    *,
    run_id: int | None = None,
    hidden: bool = False,
) -> RunEvent:
    """Append one event to the conversation's log, with the next seq.

    `event` is a typed event, or (for callers not converted yet) a dotted name plus its data;
    legacy names are stored under their current one (`message` as `message.stored`).
    """
    if isinstance(event, str):
        type_name, payload = event_type(event).type, dict(data or {})
    else:
        type_name, payload = event.type, event.data()
    with transaction.atomic():
        Conversation.objects.filter(pk=conversation_id).update(
            last_event_seq=F("last_event_seq") + 1
        )
        seq = Conversation.objects.values_list("last_event_seq", flat=True).get(pk=conversation_id)
        return RunEvent.objects.create(
            conversation_id=conversation_id,
            run_id=run_id,
            seq=seq,
            type=type_name,
            data=payload,
            hidden=hidden,
        )


def append_events(items: Sequence[tuple[int, int | None, CoreEvent]]) -> list[int]:
    """Append (conversation id, run id, event) items in one transaction; their seqs, in order.

    The stream saver writes the text of every streaming run at once this way: one transaction
    per tick for the whole process, one seq update per conversation.
    """
    by_conversation: dict[int, list[int]] = {}
    for position, (conversation_id, _run_id, _event) in enumerate(items):
        by_conversation.setdefault(conversation_id, []).append(position)
    seqs = [0] * len(items)
    rows: list[RunEvent] = []
    with transaction.atomic():
        for conversation_id, positions in sorted(by_conversation.items()):
            Conversation.objects.filter(pk=conversation_id).update(
                last_event_seq=F("last_event_seq") + len(positions)
            )
            last = Conversation.objects.values_list("last_event_seq", flat=True).get(
                pk=conversation_id
            )
            for offset, position in enumerate(positions):
                seq = last - len(positions) + 1 + offset
                seqs[position] = seq
                _cid, run_id, event = items[position]
                rows.append(
                    RunEvent(
                        conversation_id=conversation_id,
                        run_id=run_id,
                        seq=seq,
                        type=event.type,
                        data=event.data(),
                    )
                )
        RunEvent.objects.bulk_create(rows)
    return seqs


@dataclass(frozen=True, slots=True)
class StreamedBlock:
    """Text a run streamed into one block of its current model call and no row holds yet."""

    run_id: int
    call: int
    index: int
    kind: str  # text | thinking
    text: str


# Saved pieces, and `text.delta` rows that event logs written before live streaming still hold.
_SAVED_TYPES = {TextSaved.type: "text", ThinkingSaved.type: "thinking", "text.delta": "text"}
_RESETS = {ModelCalled.type, MessageStored.type, "message"}


def streamed_blocks(run_id: int, *, upto_seq: int | None = None) -> list[StreamedBlock]:
    """What the run's current model call streamed and no stored row holds yet, per block.

    A new model call starts fresh, and a stored row holds everything streamed before it.
    """
    events = RunEvent.objects.filter(run_id=run_id, type__in=[*_SAVED_TYPES, *_RESETS]).order_by(
        "seq"
    )
    if upto_seq is not None:
        events = events.filter(seq__lte=upto_seq)
    rows = list(events.values_list("type", "data"))
    start, call = 0, 0
    for i, (type_, data) in enumerate(rows):
        if type_ in _RESETS:
            start = i + 1
            if type_ == ModelCalled.type:
                call = int(data.get("call") or 0)
    blocks: dict[tuple[int, str], list[str]] = {}
    for type_, data in rows[start:]:
        kind = _SAVED_TYPES.get(type_)
        if kind is not None:
            index = int(data.get("index", 0))
            blocks.setdefault((index, kind), []).append(str(data.get("text", "")))
    return [
        StreamedBlock(run_id=run_id, call=call, index=index, kind=kind, text="".join(parts))
        for (index, kind), parts in sorted(blocks.items())
    ]


def streamed_text(run_id: int, *, upto_seq: int | None = None) -> list[dict[str, Any]]:
    """The streamed text (not thinking) no stored row holds yet: [{index, text}]."""
    return [
        {"index": block.index, "text": block.text}
        for block in streamed_blocks(run_id, upto_seq=upto_seq)
        if block.kind == "text"
    ]


def saved_text(run_id: int, call: int, index: int, kind: str) -> str:
    """The text of one streamed block saved so far (its pieces joined by offset)."""
    saved_type = TextSaved.type if kind == "text" else ThinkingSaved.type
    text = ""
    for data in (
        RunEvent.objects.filter(run_id=run_id, type=saved_type)
        .order_by("seq")
        .values_list("data", flat=True)
    ):
        if data.get("call") != call or data.get("index") != index:
            continue
        offset, piece = int(data.get("offset", 0)), str(data.get("text", ""))
        if offset <= len(text) < offset + len(piece):
            text += piece[len(text) - offset :]
    return text


def open_streams(conversation_id: int, *, upto_seq: int | None = None) -> list[StreamedBlock]:
    """The saved text of every block the conversation's active runs are streaming."""
    active = Run.objects.filter(conversation_id=conversation_id, status__in=Run.ACTIVE)
    return [
        block
        for run_id in active.order_by("pk").values_list("pk", flat=True)
        for block in streamed_blocks(run_id, upto_seq=upto_seq)
    ]


def _now() -> Any:
    from django.utils import timezone

    return timezone.now()
