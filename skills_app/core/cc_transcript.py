"""Claude Code session files (JSONL) read as Claude Code writes them: the pure half of the import.

What a real session file holds, and what this reader does with it:

- Claude Code writes **one line per content block**: an assistant answer with a text and three
  parallel tool calls is four `assistant` lines sharing one `message.id`, and the results of
  those calls may arrive between them. Lines of one `message.id` are merged into one assistant
  message (a block repeated on a later line is kept once), so every result answers a call of
  the message just before it, as the API wants.
- **Sidechain** lines (`isSidechain: true`, a subagent's conversation, interleaved with the main
  thread in older versions) are set apart: each chain of them (linked by `parentUuid`) becomes a
  `Subagent` record shown beside the main thread, never part of what the model is sent. A file
  holding nothing but a subagent's lines (newer versions write them to `agent-*.jsonl`) is read
  as that subagent's conversation.
- **Malformed lines** are skipped and listed with their line number and the reason; the file is
  refused only when nothing usable is left (or it is too big, or not a transcript at all).
- **Skill prompts** are hidden: a user line marked `isMeta` or `isSynthetic`, or unmarked but
  starting with the skill prompt's first line (`Base directory for this skill: `), is stored as
  hidden (`is_meta`), like the prompts this app delivers itself.
- Lines of other types (`summary`, `system`, `file-history-snapshot`, ...) hold no messages;
  they are counted by type, not listed as errors.

This module knows no Django: `skills_app.audit.transcript_io` stores what it returns.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .transcript import HIDDEN_PREFIX, THINKING_TYPES, parse_status_message, text_of

MAX_IMPORT_BYTES = 20 * 1024 * 1024
MAX_IMPORT_LINES = 20_000
MESSAGE_TYPES = ("user", "assistant")
BLOCK_TYPES = frozenset({"text", "tool_use", "tool_result", "image", "document", *THINKING_TYPES})
# Kinds taken from the file as given (our own exports write them); others are inferred.
KEPT_KINDS = {"error": "assistant", "notice": "assistant", "command": "user"}
# The flags that mark a user line as text the model got but the person never typed.
HIDDEN_FLAGS = ("isMeta", "isSynthetic")
# How many skipped lines a refusal message quotes (the result page lists them all).
QUOTED_SKIPS = 3


class TranscriptImportError(Exception):
    """The file as a whole cannot be imported; `line` is 1-based (0: the file itself)."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"Line {line}: {message}" if line else message)
        self.line = line
        self.message = message


class _LineError(Exception):
    """One line cannot be used; it is skipped with this reason."""


@dataclass(frozen=True, slots=True)
class ImportedMessage:
    """One message to store; `line` is the file line it starts on (merged lines: the first)."""

    line: int
    role: str
    content: list[dict[str, Any]]
    is_meta: bool
    to_model: bool
    kind: str
    thinking_blocks: int = 0
    lines: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class SkippedLine:
    line: int
    reason: str


@dataclass(frozen=True, slots=True)
class Subagent:
    """A subagent's own conversation (sidechain lines), shown beside the main thread.

    `after` is how many main-thread messages come before it: it is shown after the main message
    that answers the call that started it when that call is found (its prompt matches), else
    where its first line stood in the file.
    """

    number: int
    first_line: int
    messages: tuple[ImportedMessage, ...]
    after: int
    tool_use_id: str | None = None


@dataclass(frozen=True, slots=True)
class ParsedTranscript:
    messages: tuple[ImportedMessage, ...]
    subagents: tuple[Subagent, ...]
    skipped: tuple[SkippedLine, ...]
    other_lines: dict[str, int]
    merged_lines: int
    only_subagent: bool

    @property
    def thinking_blocks(self) -> int:
        return sum(m.thinking_blocks for m in self.all_messages())

    @property
    def hidden(self) -> int:
        return sum(1 for m in self.all_messages() if m.is_meta)

    def all_messages(self) -> Iterable[ImportedMessage]:
        yield from self.messages
        for sub in self.subagents:
            yield from sub.messages


# -- reading lines ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Line:
    number: int
    record: dict[str, Any]
    sidechain: bool


def _decode(data: bytes | str) -> tuple[list[str], list[SkippedLine]]:
    """The file's lines; a line that is not UTF-8 is skipped, not the whole file."""
    if isinstance(data, str):
        return data.splitlines(), []
    if len(data) > MAX_IMPORT_BYTES:
        raise TranscriptImportError(
            0, f"The file is larger than {MAX_IMPORT_BYTES // (1024 * 1024)} MB; split it."
        )
    data = data.removeprefix(b"\xef\xbb\xbf")
    lines: list[str] = []
    skipped: list[SkippedLine] = []
    for number, raw in enumerate(data.splitlines(), start=1):
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            lines.append("")
            skipped.append(SkippedLine(number, "not UTF-8 text"))
    return lines, skipped


def _records(lines: list[str], skipped: list[SkippedLine], others: Counter[str]) -> list[_Line]:
    out: list[_Line] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as exc:
            skipped.append(SkippedLine(number, f"not valid JSON ({exc.msg})"))
            continue
        if not isinstance(record, dict):
            skipped.append(SkippedLine(number, "not a JSON object"))
            continue
        kind = record.get("type")
        if not isinstance(kind, str) or not kind:
            skipped.append(SkippedLine(number, 'no "type" ("user" or "assistant")'))
            continue
        if kind not in MESSAGE_TYPES:
            others[kind] += 1
            continue
        out.append(_Line(number, record, record.get("isSidechain") is True))
    return out


# -- one thread ---------------------------------------------------------------------------------


@dataclass(slots=True)
class _Thread:
    """Messages of one thread being built, and the tool calls its results may answer."""

    messages: list[ImportedMessage] = field(default_factory=list)
    calls: dict[str, int] = field(default_factory=dict)  # tool_use id -> its line
    open: set[str] = field(default_factory=set)  # calls of the latest assistant message
    answered: set[str] = field(default_factory=set)
    skipped_calls: dict[str, int] = field(default_factory=dict)  # calls on skipped lines
    current_id: str | None = None  # message.id of the latest assistant message
    current_index: int = -1
    merged: int = 0
    after_current: bool = False  # only tool results (or nothing) since the latest assistant
    tool_uses: dict[str, str] = field(default_factory=dict)  # Task prompt -> tool_use id


def _read_thread(lines: list[_Line], skipped: list[SkippedLine]) -> _Thread:
    thread = _Thread()
    for line in lines:
        try:
            _add_line(thread, line)
        except _LineError as exc:
            skipped.append(SkippedLine(line.number, str(exc)))
            _remember_skipped_calls(thread, line)
    return thread


def _remember_skipped_calls(thread: _Thread, line: _Line) -> None:
    body = line.record.get("message")
    content = body.get("content") if isinstance(body, dict) else None
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "tool_use":
            tid = block.get("id")
            if isinstance(tid, str):
                thread.skipped_calls.setdefault(tid, line.number)


def _add_line(thread: _Thread, line: _Line) -> None:
    record = line.record
    role = record["type"]
    body = record.get("message")
    if not isinstance(body, dict):
        raise _LineError('"message" is not an object with role and content')
    if body.get("role", role) != role:
        raise _LineError(f'"message.role" is {body.get("role")!r} but "type" is {role!r}')
    raw_content = body.get("content")
    if isinstance(raw_content, str):
        raw_content = [{"type": "text", "text": raw_content}] if raw_content else []
    if not isinstance(raw_content, list):
        raise _LineError('"message.content" is neither text nor a list of blocks')
    hidden = any(_flag(record, key, False) for key in HIDDEN_FLAGS)
    to_model = _flag(record, "toModel", True)
    message_id = body.get("id") if role == "assistant" else None
    merging = (
        role == "assistant"
        and isinstance(message_id, str)
        and message_id == thread.current_id
        and thread.after_current
        and to_model
    )
    content = [_checked_block(i, role, b) for i, b in enumerate(raw_content, start=1)]
    if merging:
        previous = thread.messages[thread.current_index]
        content = [b for b in content if not _already_in(b, previous.content)]
    _pair_tool_blocks(thread, line.number, role, content, new_assistant=not merging and to_model)
    if merging:
        previous = thread.messages[thread.current_index]
        merged = [*previous.content, *content]
        thread.messages[thread.current_index] = ImportedMessage(
            previous.line,
            "assistant",
            merged,
            previous.is_meta,
            previous.to_model,
            _kind("assistant", merged, record.get("kind"), False, thread),
            sum(1 for b in merged if b["type"] in THINKING_TYPES),
            (*previous.lines, line.number),
        )
        thread.merged += 1
        return
    if not content:
        return
    if role == "assistant":
        thread.current_id = message_id if isinstance(message_id, str) else None
        thread.current_index = len(thread.messages)
        thread.after_current = True
    elif not all(b["type"] == "tool_result" for b in content):
        thread.after_current = False
    if role == "user" and not hidden and _looks_like_skill_prompt(content):
        hidden = True  # an unflagged skill prompt is still the skill's hidden text
    kind = _kind(role, content, record.get("kind"), hidden, thread)
    thinking = sum(1 for b in content if b["type"] in THINKING_TYPES)
    thread.messages.append(
        ImportedMessage(
            line.number, role, content, hidden, to_model, kind, thinking, (line.number,)
        )
    )


def _flag(record: dict[str, Any], key: str, default: bool) -> bool:
    value = record.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _LineError(f'"{key}" is {value!r}, not true or false')
    return value


def _already_in(block: dict[str, Any], content: list[dict[str, Any]]) -> bool:
    """A block a later line of the same message repeats (same call id, or identical)."""
    if block["type"] == "tool_use":
        return any(b.get("type") == "tool_use" and b.get("id") == block["id"] for b in content)
    return block in content


def _checked_block(index: int, role: str, block: Any) -> dict[str, Any]:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise _LineError(f"content block {index} has no type")
    kind = block["type"]
    where = f"content block {index} ({kind})"
    if kind not in BLOCK_TYPES:
        raise _LineError(
            f"{where} is not a block type this app stores ({', '.join(sorted(BLOCK_TYPES))})"
        )
    if kind == "text" and not isinstance(block.get("text"), str):
        raise _LineError(f'{where}: "text" is not a string')
    if kind in THINKING_TYPES and role != "assistant":
        raise _LineError(f"{where}: only assistant messages think")
    if kind == "thinking" and not (
        isinstance(block.get("thinking"), str) and isinstance(block.get("signature", ""), str)
    ):
        raise _LineError(f'{where}: "thinking" and "signature" are not strings')
    if kind == "redacted_thinking" and not isinstance(block.get("data"), str):
        raise _LineError(f'{where}: "data" is not a string')
    if kind == "tool_use":
        if role != "assistant":
            raise _LineError(f"{where}: only assistant messages call tools")
        tid, name = block.get("id"), block.get("name")
        if not isinstance(tid, str) or not tid or not isinstance(name, str) or not name:
            raise _LineError(f'{where}: needs a string "id" and "name"')
        if not isinstance(block.get("input", {}), dict):
            raise _LineError(f'{where}: "input" is not an object')
    if kind == "tool_result":
        if role != "user":
            raise _LineError(f"{where}: tool results belong to user messages")
        if not isinstance(block.get("tool_use_id"), str):
            raise _LineError(f'{where}: "tool_use_id" is not a string')
        inner = block.get("content", "")
        if not isinstance(inner, str | list):
            raise _LineError(f'{where}: "content" is neither text nor a list')
        if inner == "" or (isinstance(inner, list) and any(_empty_text(b) for b in inner)):
            # Claude Code writes a tool's empty output as empty text; the API refuses empty
            # text blocks, so the stored result has no content instead.
            kept = [b for b in inner if not _empty_text(b)] if isinstance(inner, list) else []
            cleaned = {k: v for k, v in block.items() if k != "content"}
            return {**cleaned, "content": kept} if kept else cleaned
    return block


def _empty_text(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "text" and not block.get("text")


def _pair_tool_blocks(
    thread: _Thread,
    number: int,
    role: str,
    content: list[dict[str, Any]],
    *,
    new_assistant: bool,
) -> None:
    """Check calls and results of one line against the thread before changing anything."""
    if role == "assistant":
        for block in content:
            if block["type"] != "tool_use":
                continue
            tid = block["id"]
            if tid in thread.calls:
                raise _LineError(f"tool call id {tid} was already used on line {thread.calls[tid]}")
        if new_assistant:
            thread.open = set()
        for block in content:
            if block["type"] == "tool_use":
                thread.calls[block["id"]] = number
                thread.open.add(block["id"])
                prompt = block.get("input", {}).get("prompt")
                if isinstance(prompt, str) and prompt:
                    thread.tool_uses.setdefault(prompt, block["id"])
        return
    seen: set[str] = set()
    for block in content:
        if block["type"] != "tool_result":
            continue
        tid = block["tool_use_id"]
        if tid in thread.skipped_calls:
            raise _LineError(
                f"the tool result for {tid} answers a call on line {thread.skipped_calls[tid]}, "
                "which was skipped"
            )
        if tid not in thread.calls:
            raise _LineError(f"the tool result for {tid} answers no earlier tool call")
        if tid in thread.answered or tid in seen:
            raise _LineError(f"the tool call {tid} is answered twice")
        if tid not in thread.open:
            raise _LineError(
                f"the tool result for {tid} (called on line {thread.calls[tid]}) does not follow "
                "its call: another assistant message came between them"
            )
        seen.add(tid)
    thread.answered |= seen


def _looks_like_skill_prompt(content: list[dict[str, Any]]) -> bool:
    first = next((b for b in content if b["type"] == "text"), None)
    return first is not None and str(first["text"]).startswith(HIDDEN_PREFIX)


def _kind(
    role: str, content: list[dict[str, Any]], given: Any, is_meta: bool, thread: _Thread
) -> str:
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
    if is_meta and thread.messages and thread.messages[-1].kind == "skill_status":
        # A slash command's expanded prompt follows its status line, flagged but unprefixed.
        return "skill_prompt"
    return "text"


# -- the whole file -----------------------------------------------------------------------------


def parse_transcript(data: bytes | str) -> ParsedTranscript:
    """Read a Claude Code (or Skillscope) JSONL transcript; TranscriptImportError if unusable."""
    lines, skipped = _decode(data)
    if len(lines) > MAX_IMPORT_LINES:
        raise TranscriptImportError(
            0,
            f"The file has {len(lines):,} lines; a transcript may have at most "
            f"{MAX_IMPORT_LINES:,}. Split it.",
        )
    others: Counter[str] = Counter()
    records = _records(lines, skipped, others)
    main = [r for r in records if not r.sidechain]
    chains = _chains(records)
    only_subagent = not main and bool(chains)
    if only_subagent:
        # A subagent's own file: its first chain is the conversation, any other stays beside it.
        main = [_Line(r.number, r.record, False) for r in chains.pop(0)]
    thread = _read_thread(main, skipped)
    _close_open_calls(thread)
    subagents = tuple(_subagents(chains, thread, skipped))
    skipped.sort(key=lambda s: s.line)
    if not thread.messages and not any(s.messages for s in subagents):
        raise TranscriptImportError(0, _nothing_usable(skipped, others))
    return ParsedTranscript(
        messages=tuple(thread.messages),
        subagents=tuple(s for s in subagents if s.messages),
        skipped=tuple(skipped),
        other_lines=dict(others),
        merged_lines=thread.merged,
        only_subagent=only_subagent,
    )


# What an imported call without a result is answered with, so the next request is valid.
UNFINISHED_CALL = "The session file ends before this tool call's result; none was recorded."


def _close_open_calls(thread: _Thread) -> None:
    """Answer the last assistant message's calls that the file never answers.

    The model may only be sent a history where every call has its result; a session cut off
    mid-turn (the file ends, or the result line was skipped) would make the next request fail.
    """
    if thread.current_index < 0:
        return
    last = thread.messages[thread.current_index]
    missing = [
        b["id"] for b in last.content if b["type"] == "tool_use" and b["id"] not in thread.answered
    ]
    if not missing or not last.to_model:
        return
    blocks = [
        {"type": "tool_result", "tool_use_id": tid, "content": UNFINISHED_CALL, "is_error": True}
        for tid in missing
    ]
    # Placed (and numbered, for the order subagents are placed in) after the file's last message.
    at = thread.messages[-1].line
    closing = ImportedMessage(at, "user", blocks, False, True, "tool_result", 0, ())
    thread.messages.append(closing)
    thread.answered |= set(missing)


def _nothing_usable(skipped: list[SkippedLine], others: Counter[str]) -> str:
    if not skipped:
        kinds = f" (only {', '.join(sorted(others))} lines)" if others else ""
        return f'The file holds no "user" or "assistant" messages{kinds}.'
    quoted = "; ".join(f"line {s.line}: {s.reason}" for s in skipped[:QUOTED_SKIPS])
    more = f"; and {len(skipped) - QUOTED_SKIPS} more" if len(skipped) > QUOTED_SKIPS else ""
    return f"No line of the file could be used ({quoted}{more})."


def _chains(records: list[_Line]) -> list[list[_Line]]:
    """Sidechain lines grouped into chains by `parentUuid` (a line whose parent is not a
    sidechain line starts a chain), in the order their first lines appear."""
    chains: list[list[_Line]] = []
    chain_of: dict[str, int] = {}
    for line in records:
        if not line.sidechain:
            continue
        parent = line.record.get("parentUuid")
        index = chain_of.get(parent) if isinstance(parent, str) else None
        if index is None:
            index = len(chains)
            chains.append([])
        chains[index].append(line)
        uid = line.record.get("uuid")
        if isinstance(uid, str):
            chain_of[uid] = index
    return chains


def _subagents(
    chains: list[list[_Line]], thread: _Thread, skipped: list[SkippedLine]
) -> list[Subagent]:
    """Each chain of sidechain lines read as its own thread, placed beside the main one."""
    main_lines = [m.line for m in thread.messages]  # ascending: the thread is in file order
    result_at = _result_positions(thread)
    out: list[Subagent] = []
    for number, chain in enumerate(chains, start=1):
        sub = _read_thread(chain, skipped)
        call = _calling_tool_use(sub, thread)
        if call is not None and call in result_at:
            after = result_at[call] + 1
        else:
            after = bisect_left(main_lines, chain[0].number)
        out.append(Subagent(number, chain[0].number, tuple(sub.messages), after, call))
    return out


def _result_positions(thread: _Thread) -> dict[str, int]:
    where: dict[str, int] = {}
    for index, message in enumerate(thread.messages):
        for block in message.content:
            if block.get("type") == "tool_result":
                where.setdefault(str(block.get("tool_use_id")), index)
    return where


def _calling_tool_use(sub: _Thread, thread: _Thread) -> str | None:
    """The main thread's call (Task/Agent) whose prompt is the subagent's first message."""
    first = next((m for m in sub.messages if m.role == "user"), None)
    if first is None:
        return None
    return thread.tool_uses.get(text_of(first.content))
