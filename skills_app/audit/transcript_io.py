"""Conversations as JSONL in the Claude Code transcript shape: export, and import into a new one.

One JSON object per line: `type` ("user"/"assistant"), `uuid` (uuid5 of the session id and the row's
seq, so a re-export gives the same ids), `parentUuid` (the previous line's), `sessionId`, `isMeta`,
`timestamp`, `message` {role, content}, `kind`, and `toModel: false` for rows the model never saw.

Thinking blocks are exported and imported with the rest. An imported row's thinking is shown but
never sent to the model (`FOREIGN_THINKING`): its signatures belong to another API key, and the
API rejects thinking it cannot verify.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from skills_app.core.transcript import (
    EXCLUDED,
    FOREIGN_THINKING,
    HIDDEN_PREFIX,
    THINKING_TYPES,
    parse_status_message,
    text_of,
)
from skills_app.models import Conversation, Message
from skills_app.visibility import Outbound, outbound

MAX_IMPORT_BYTES = 20 * 1024 * 1024
MAX_IMPORT_LINES = 20_000
MESSAGE_TYPES = ("user", "assistant")
# Claude Code transcripts carry other line types (summaries, snapshots); they hold no messages.
BLOCK_TYPES = frozenset({"text", "tool_use", "tool_result", "image", "document", *THINKING_TYPES})
# Kinds taken from the file as given; every other kind is inferred from the content.
KEPT_KINDS = {"error": "assistant", "notice": "assistant", "command": "user"}


class TranscriptImportError(Exception):
    """A line that cannot be imported; `line` is 1-based."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"Line {line}: {message}")
        self.line = line
        self.message = message


# -- export -------------------------------------------------------------------------------------


def line_uuid(conversation: Conversation, seq: int) -> str:
    """A stable id for the row `seq` of a conversation."""
    return str(uuid.uuid5(conversation.session_id, f"message-{seq}"))


# Rows whose text is someone's own words (the user's, the model's prose) or the visible status
# message of a skill (its arguments are visible by design): exported as written.
OWN_WORDS_KINDS = frozenset({"text", "tool_use", "command", "skill_status"})


def export_lines(conversation: Conversation, *, include_hidden: bool) -> Iterator[str]:
    """The JSONL lines of a conversation; hidden rows only when `include_hidden`.

    Without `include_hidden` (a person without the inspect permission) every other text passes
    the conversation's outbound filter, as in the chat: tool inputs and results, error rows.
    The model's and the user's own text, and skills' status messages, are exported as written.
    """
    rows = conversation.messages.order_by("seq")
    out = outbound(conversation.pk, can_inspect=include_hidden)
    if not include_hidden:
        rows = rows.filter(is_meta=False)
    parent: str | None = None
    session = str(conversation.session_id)
    for row in rows.iterator():
        this = line_uuid(conversation, row.seq)
        record: dict[str, Any] = {
            "type": row.role,
            "uuid": this,
            "parentUuid": parent,
            "sessionId": session,
            "isMeta": row.is_meta,
            "timestamp": row.created_at.isoformat().replace("+00:00", "Z"),
            "message": {"role": row.role, "content": _shown_content(row, out)},
            "kind": row.kind,
        }
        if not row.to_model or (row.meta or {}).get(EXCLUDED):
            # A failed or refused turn is left out of requests: an import must not send it either.
            record["toModel"] = False
        parent = this
        yield json.dumps(record, ensure_ascii=False) + "\n"


def _shown_content(row: Message, out: Outbound) -> list[dict[str, Any]]:
    if out.can_inspect:
        return list(row.content)
    shown = []
    for block in row.content:
        own = block.get("type") == "text" and row.kind in OWN_WORDS_KINDS
        shown.append(block if own else out.value(block))
    return shown


def export_jsonl(conversation: Conversation, *, include_hidden: bool) -> str:
    return "".join(export_lines(conversation, include_hidden=include_hidden))


# -- import -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ImportedMessage:
    line: int
    role: str
    content: list[dict[str, Any]]
    is_meta: bool
    to_model: bool
    kind: str
    thinking_blocks: int = 0


@dataclass(frozen=True, slots=True)
class ImportResult:
    conversation: Conversation
    messages: int
    hidden: int
    skipped_lines: int
    # Kept and shown, never sent to the model (signed for another API key).
    thinking_blocks: int


def parse_jsonl(data: bytes | str) -> tuple[list[ImportedMessage], int, int]:
    """Validate a transcript: (messages, skipped non-message lines, thinking blocks kept)."""
    if isinstance(data, bytes):
        if len(data) > MAX_IMPORT_BYTES:
            raise TranscriptImportError(
                0, f"the file is larger than {MAX_IMPORT_BYTES // (1024 * 1024)} MB."
            )
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            line = data[: exc.start].count(b"\n") + 1
            raise TranscriptImportError(line, "the file is not UTF-8 text.") from None
    else:
        text = data
    messages: list[ImportedMessage] = []
    skipped = thinking = 0
    seen = _ToolIds()
    lines = text.splitlines()
    if len(lines) > MAX_IMPORT_LINES:
        raise TranscriptImportError(
            MAX_IMPORT_LINES + 1, f"a transcript may have at most {MAX_IMPORT_LINES} lines."
        )
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise TranscriptImportError(number, f"not valid JSON ({exc.msg}).") from None
        if not isinstance(record, dict):
            raise TranscriptImportError(number, "each line must be a JSON object.")
        kind_of_line = record.get("type")
        if not isinstance(kind_of_line, str) or not kind_of_line:
            raise TranscriptImportError(number, 'missing "type" ("user" or "assistant").')
        if kind_of_line not in MESSAGE_TYPES:
            skipped += 1
            continue
        message = _parse_message(number, record, seen)
        if message is not None:
            thinking += message.thinking_blocks
            messages.append(message)
    if not messages:
        raise TranscriptImportError(
            max(len(lines), 1), 'the file holds no "user" or "assistant" messages.'
        )
    return messages, skipped, thinking


@dataclass(slots=True)
class _ToolIds:
    """tool_use ids seen so far, and those of the last assistant message the model saw."""

    lines: dict[str, int] = field(default_factory=dict)
    open: set[str] = field(default_factory=set)
    answered: set[str] = field(default_factory=set)


def _parse_message(number: int, record: dict[str, Any], seen: _ToolIds) -> ImportedMessage | None:
    role = record["type"]
    body = record.get("message")
    if not isinstance(body, dict):
        raise TranscriptImportError(number, '"message" must be an object with role and content.')
    if body.get("role", role) != role:
        raise TranscriptImportError(
            number, f'"message.role" is {body.get("role")!r} but "type" is {role!r}.'
        )
    raw_content = body.get("content")
    if isinstance(raw_content, str):
        raw_content = [{"type": "text", "text": raw_content}]
    if not isinstance(raw_content, list):
        raise TranscriptImportError(number, '"message.content" must be a string or a list.')
    is_meta = _flag(number, record, "isMeta", False)
    to_model = _flag(number, record, "toModel", True)
    content: list[dict[str, Any]] = []
    if role == "assistant" and to_model:
        # The API wants results for exactly the previous assistant turn's tool calls.
        seen.open = set()
    for index, block in enumerate(raw_content, start=1):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise TranscriptImportError(number, f"content block {index} has no type.")
        _check_block(number, index, role, block, seen)
        content.append(block)
    if not content:
        return None
    kind = _kind(role, content, record.get("kind"), is_meta)
    thinking = sum(1 for b in content if b["type"] in THINKING_TYPES)
    return ImportedMessage(number, role, content, is_meta, to_model, kind, thinking)


def _flag(number: int, record: dict[str, Any], key: str, default: bool) -> bool:
    value = record.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise TranscriptImportError(number, f'"{key}" must be true or false.')
    return value


def _check_block(
    number: int,
    index: int,
    role: str,
    block: dict[str, Any],
    seen: _ToolIds,
) -> None:
    kind = block["type"]
    where = f"content block {index} ({kind})"
    if kind not in BLOCK_TYPES:
        raise TranscriptImportError(
            number, f"{where}: unsupported block type; use one of {', '.join(sorted(BLOCK_TYPES))}."
        )
    if kind == "text" and not isinstance(block.get("text"), str):
        raise TranscriptImportError(number, f'{where}: "text" must be a string.')
    if kind in THINKING_TYPES and role != "assistant":
        raise TranscriptImportError(number, f"{where}: only assistant messages think.")
    if kind == "thinking" and not (
        isinstance(block.get("thinking"), str) and isinstance(block.get("signature", ""), str)
    ):
        raise TranscriptImportError(number, f'{where}: "thinking" and "signature" must be strings.')
    if kind == "redacted_thinking" and not isinstance(block.get("data"), str):
        raise TranscriptImportError(number, f'{where}: "data" must be a string.')
    if kind == "tool_use":
        if role != "assistant":
            raise TranscriptImportError(number, f"{where}: only assistant messages call tools.")
        tid, name = block.get("id"), block.get("name")
        if not isinstance(tid, str) or not tid or not isinstance(name, str) or not name:
            raise TranscriptImportError(number, f'{where}: needs a string "id" and "name".')
        if not isinstance(block.get("input", {}), dict):
            raise TranscriptImportError(number, f'{where}: "input" must be an object.')
        if tid in seen.lines:
            raise TranscriptImportError(
                number, f"{where}: the id {tid} was already used on line {seen.lines[tid]}."
            )
        seen.lines[tid] = number
        seen.open.add(tid)
    if kind == "tool_result":
        if role != "user":
            raise TranscriptImportError(number, f"{where}: tool results belong to user messages.")
        tid = block.get("tool_use_id")
        if not isinstance(tid, str) or tid not in seen.lines:
            raise TranscriptImportError(
                number, f"{where}: tool_use_id {tid!r} answers no earlier tool_use."
            )
        if tid in seen.answered:
            raise TranscriptImportError(number, f"{where}: {tid} is answered twice.")
        if tid not in seen.open:
            raise TranscriptImportError(
                number,
                f"{where}: {tid} (line {seen.lines[tid]}) is not a call of the assistant "
                "message just before; a result must follow its call.",
            )
        seen.answered.add(tid)
        if not isinstance(block.get("content", ""), str | list):
            raise TranscriptImportError(number, f'{where}: "content" must be a string or a list.')


def _kind(role: str, content: list[dict[str, Any]], given: Any, is_meta: bool) -> str:
    if given in KEPT_KINDS and KEPT_KINDS[given] == role:
        return str(given)
    if given == "permissions" and is_meta:
        return "permissions"
    types = {b["type"] for b in content}
    if role == "assistant":
        return "tool_use" if "tool_use" in types else "text"
    if types == {"tool_result"}:
        return "tool_result"
    text = text_of(content)
    if parse_status_message(text) is not None:
        return "skill_status"
    if text.startswith(HIDDEN_PREFIX):
        return "skill_prompt"
    return "text"


def import_transcript(owner_id: int, data: bytes | str, *, title: str = "") -> ImportResult:
    """Create a new conversation owned by `owner_id` from a JSONL transcript; all or nothing."""
    messages, skipped, thinking = parse_jsonl(data)
    with transaction.atomic():
        conversation = Conversation.objects.create(
            owner_id=owner_id, title=(title or _title(messages))[:200]
        )
        Message.objects.bulk_create(
            Message(
                conversation=conversation,
                seq=seq,
                role=m.role,
                content=m.content,
                is_meta=m.is_meta,
                to_model=m.to_model,
                kind=m.kind,
                meta=_meta(m),
            )
            for seq, m in enumerate(messages, start=1)
        )
    return ImportResult(
        conversation=conversation,
        messages=len(messages),
        hidden=sum(1 for m in messages if m.is_meta),
        skipped_lines=skipped,
        thinking_blocks=thinking,
    )


def _meta(message: ImportedMessage) -> dict[str, Any]:
    meta: dict[str, Any] = {"imported_line": message.line}
    if message.thinking_blocks:
        meta[FOREIGN_THINKING] = True
    if message.kind == "skill_status":
        text = text_of(message.content)
        meta.update(parse_status_message(text) or {})
        meta["skill"] = meta.pop("name", "")
    return meta


def _title(messages: list[ImportedMessage]) -> str:
    for m in messages:
        if m.role == "user" and not m.is_meta and m.kind == "text":
            text = " ".join(text_of(m.content, sep=" ").split())
            if text:
                return "Imported: " + (text[:60] + "…" if len(text) > 60 else text)
    return "Imported conversation"
