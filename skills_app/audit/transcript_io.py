"""Conversations as JSONL in the Claude Code transcript shape: export, and import into a new one.

One JSON object per line, with the envelope Claude Code writes (and transcript readers such as
claude-code-log require): `type` ("user"/"assistant"), `uuid` (uuid5 of the session id and the
row's seq, so a re-export gives the same ids), `parentUuid`, `sessionId`, `isSidechain`,
`isMeta`, `userType`, `cwd`, `version`, `timestamp`, `message` {role, content; an assistant's
also id, type and model}; plus our own `kind`, and `toModel: false` for rows the model never
saw. A subagent's rows (a forked skill's child run, or an imported subagent record) are written
as sidechain lines with their own parent chain, as Claude Code writes them.

Reading is `core.cc_transcript` (Claude Code's own files: one line per content block, sidechains,
malformed lines skipped and reported); this module stores what it returns.

Thinking blocks are exported and imported with the rest. An imported row's thinking is shown but
never sent to the model (`FOREIGN_THINKING`): its signatures belong to another API key, and the
API rejects thinking it cannot verify.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from skills_app.core.cc_transcript import (
    MAX_IMPORT_BYTES,
    ImportedMessage,
    ParsedTranscript,
    SkippedLine,
    Subagent,
    TranscriptImportError,
    parse_transcript,
)
from skills_app.core.transcript import (
    EXCLUDED,
    FOREIGN_THINKING,
    parse_status_message,
    text_of,
)
from skills_app.models import Conversation, Message
from skills_app.visibility import Outbound, outbound

__all__ = [
    "MAX_IMPORT_BYTES",
    "ImportResult",
    "TranscriptImportError",
    "export_lines",
    "import_transcript",
    "line_uuid",
]

# Who wrote the file, in Claude Code's `version` field (readers require one).
EXPORT_VERSION = "skillscope-export-1"
# Readers require a working folder; the server's own paths are nobody's business.
EXPORT_CWD = "/"


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
    rows = conversation.messages.select_related("run").order_by("seq")
    out = outbound(conversation.pk, can_inspect=include_hidden)
    if not include_hidden:
        rows = rows.filter(is_meta=False)
    parents: dict[str, str | None] = {}  # thread -> its last line's uuid
    session = str(conversation.session_id)
    for row in rows.iterator():
        this = line_uuid(conversation, row.seq)
        thread = _thread_of(row)
        message: dict[str, Any] = {"role": row.role, "content": _shown_content(row, out)}
        if row.role == "assistant":
            message = {
                "id": f"msg_{uuid.UUID(this).hex}",
                "type": "message",
                **message,
                "model": (row.run.model if row.run is not None else "") or "unknown",
            }
        record: dict[str, Any] = {
            "type": row.role,
            "uuid": this,
            "parentUuid": parents.get(thread),
            "sessionId": session,
            "isSidechain": thread != "main",
            "isMeta": row.is_meta,
            "userType": "external",
            "cwd": EXPORT_CWD,
            "version": EXPORT_VERSION,
            "timestamp": row.created_at.isoformat().replace("+00:00", "Z"),
            "message": message,
            "kind": row.kind,
        }
        if not row.to_model or (row.meta or {}).get(EXCLUDED):
            # A failed or refused turn is left out of requests: an import must not send it either.
            record["toModel"] = False
        parents[thread] = this
        yield json.dumps(record, ensure_ascii=False) + "\n"


def _thread_of(row: Message) -> str:
    """ "main", or the subagent a row belongs to (a forked skill's run, an imported record)."""
    meta = row.meta if isinstance(row.meta, dict) else {}
    if meta.get("subagent_run"):
        return f"run-{meta['subagent_run']}"
    if meta.get("imported_subagent"):
        return f"imported-{meta['imported_subagent']}"
    return "main"


def _shown_content(row: Message, out: Outbound) -> list[dict[str, Any]]:
    """The row's blocks as the reader may see them; an `mcp__` call's input always without the
    stored MCP secrets (an import sends the masked call back to the model, never the secret)."""
    shown = []
    for block in row.content:
        if block.get("type") == "tool_use":  # its input filtered and masked
            tool_input = out.call_input(str(block.get("name", "")), block.get("input") or {})
            block = {**block, "input": tool_input}
        elif not out.can_inspect and not (
            block.get("type") == "text" and row.kind in OWN_WORDS_KINDS
        ):
            block = out.value(block)
        shown.append(block)
    return shown


# -- import -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ImportResult:
    conversation: Conversation
    messages: int
    hidden: int
    # Lines skipped as unusable, each with its reason; shown on the result page.
    skipped: tuple[SkippedLine, ...]
    # Lines of other types (summary, system, ...), by type: they hold no messages.
    other_lines: dict[str, int]
    subagents: int
    merged_lines: int
    only_subagent: bool
    # Kept and shown, never sent to the model (signed for another API key).
    thinking_blocks: int

    def report(self) -> dict[str, Any]:
        """The result page's facts, JSON-safe (kept in the session for one page view)."""
        return {
            "conversation": self.conversation.pk,
            "title": self.conversation.title,
            "messages": self.messages,
            "hidden": self.hidden,
            "skipped": [[s.line, s.reason] for s in self.skipped],
            "other_lines": self.other_lines,
            "subagents": self.subagents,
            "merged_lines": self.merged_lines,
            "only_subagent": self.only_subagent,
            "thinking_blocks": self.thinking_blocks,
        }


def import_transcript(owner_id: int, data: bytes | str, *, title: str = "") -> ImportResult:
    """Create a new conversation owned by `owner_id` from a JSONL transcript.

    Unusable lines are skipped and reported; the conversation is created whole or not at all.
    A subagent's messages are stored after the main message they belong beside, never sent to
    the model (`to_model=False`), marked with the record they belong to.
    """
    parsed = parse_transcript(data)
    rows: list[Message] = []
    conversation = Conversation(owner_id=owner_id, title=(title or _title(parsed))[:200])
    by_position: dict[int, list[Subagent]] = {}
    for sub in parsed.subagents:
        by_position.setdefault(sub.after, []).append(sub)

    def add(m: ImportedMessage, **extra: Any) -> None:
        meta = _meta(m)
        meta.update(extra)
        to_model = m.to_model and "imported_subagent" not in meta
        rows.append(
            Message(
                conversation=conversation,
                seq=len(rows) + 1,
                role=m.role,
                content=m.content,
                is_meta=m.is_meta,
                to_model=to_model,
                kind=m.kind,
                meta=meta,
            )
        )

    def add_subagents(position: int) -> None:
        for sub in by_position.get(position, []):
            for m in sub.messages:
                add(m, imported_subagent=sub.number, subagent_line=sub.first_line)

    add_subagents(0)
    for index, message in enumerate(parsed.messages, start=1):
        add(message)
        add_subagents(index)
    with transaction.atomic():
        conversation.save()
        Message.objects.bulk_create(rows)
    return ImportResult(
        conversation=conversation,
        messages=len(rows),
        hidden=parsed.hidden,
        skipped=parsed.skipped,
        other_lines=parsed.other_lines,
        subagents=len(parsed.subagents),
        merged_lines=parsed.merged_lines,
        only_subagent=parsed.only_subagent,
        thinking_blocks=parsed.thinking_blocks,
    )


def _meta(message: ImportedMessage) -> dict[str, Any]:
    meta: dict[str, Any] = {"imported_line": message.line}
    if not message.lines:
        # Not in the file: the results the importer gave calls the file never answers.
        meta = {"imported_closing": True}
    if len(message.lines) > 1:
        meta["imported_lines"] = list(message.lines)
    if message.thinking_blocks:
        meta[FOREIGN_THINKING] = True
    if message.kind == "skill_status":
        text = text_of(message.content)
        meta.update(parse_status_message(text) or {})
        meta["skill"] = meta.pop("name", "").lstrip("/")
    return meta


def _title(parsed: ParsedTranscript) -> str:
    for m in parsed.all_messages():
        if m.role == "user" and not m.is_meta and m.kind == "text":
            text = " ".join(text_of(m.content, sep=" ").split())
            if text:
                return "Imported: " + (text[:60] + "…" if len(text) > 60 else text)
    return "Imported conversation"
