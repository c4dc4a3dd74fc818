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
from dataclasses import dataclass
from typing import Any

from .cc_thread import (
    MESSAGE_TYPES,
    ImportedMessage,
    Line,
    LineError,
    SkippedLine,
    Thread,
    close_open_calls,
    close_tool_turn,
    read_thread,
)
from .transcript import text_of

__all__ = [
    "MAX_IMPORT_BYTES",
    "MAX_IMPORT_LINES",
    "MAX_LINE_DEPTH",
    "ImportedMessage",
    "ParsedTranscript",
    "SkippedLine",
    "Subagent",
    "TranscriptImportError",
    "parse_transcript",
]

MAX_IMPORT_BYTES = 20 * 1024 * 1024
MAX_IMPORT_LINES = 20_000
# Nesting a line may have (its own object is level 1). Claude Code's lines reach about 10; a tool's
# input adds its own. Deeper lines are refused before anything recurses over them (the JSON
# parser, the database, the outbound filter, the templates).
MAX_LINE_DEPTH = 100
# Python refuses to convert longer integers (sys.get_int_max_str_digits()): refuse them first.
MAX_INT_DIGITS = 4_300
# How many skipped lines a refusal message quotes (the result page lists them all).
QUOTED_SKIPS = 3


class TranscriptImportError(Exception):
    """The file as a whole cannot be imported; `line` is 1-based (0: the file itself)."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"Line {line}: {message}" if line else message)
        self.line = line
        self.message = message


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


def _records(lines: list[str], skipped: list[SkippedLine], others: Counter[str]) -> list[Line]:
    out: list[Line] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            record = _load_line(raw)
        except LineError as exc:
            skipped.append(SkippedLine(number, str(exc)))
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
        out.append(Line(number, record, record.get("isSidechain") is True))
    return out


TOO_DEEP = f"JSON nested more than {MAX_LINE_DEPTH} levels deep"


def _load_line(raw: str) -> Any:
    """One line's JSON value, or LineError saying why it cannot be stored and sent."""
    try:
        value = json.loads(raw, parse_constant=_no_constant, parse_int=_bounded_int)
    except json.JSONDecodeError as exc:
        raise LineError(f"not valid JSON ({exc.msg})") from None
    except RecursionError:
        # Far deeper than the limit: the parser ran out of stack before the check below.
        raise LineError(TOO_DEEP) from None
    _check_value(value)
    return value


def _no_constant(name: str) -> Any:
    raise LineError(f"{name} is not a JSON value")


def _bounded_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise LineError(f"holds a number with more than {MAX_INT_DIGITS:,} digits")
    return int(digits)


def _check_value(value: Any) -> None:
    """Refuse what the database or the model request cannot take: too deep, lone surrogates, NUL."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            _check_text(item)
            continue
        if not isinstance(item, dict | list):
            continue
        if depth > MAX_LINE_DEPTH:
            raise LineError(TOO_DEEP)
        if isinstance(item, dict):
            for key in item:
                _check_text(key)
            stack.extend((v, depth + 1) for v in item.values())
        else:
            stack.extend((v, depth + 1) for v in item)


def _check_text(text: str) -> None:
    if "\x00" in text:
        # PostgreSQL's JSON columns refuse it.
        raise LineError("holds a NUL character (\\u0000), which cannot be stored")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # Stored, it would make every later request to the model fail to encode.
        raise LineError("holds a lone surrogate (\\ud800-\\udfff), which is not text") from None


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
        main = [Line(r.number, r.record, False) for r in chains.pop(0)]
    thread = read_thread(main, skipped)
    close_tool_turn(thread, close_open_calls(thread))
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


# What to do about a file with nothing usable in it.
EXPECTED_FILE = (
    "Import a Claude Code session file (.jsonl, one JSON object per line, as Claude Code writes "
    "under ~/.claude/projects/) or a JSONL export of Skillscope."
)


def _nothing_usable(skipped: list[SkippedLine], others: Counter[str]) -> str:
    if not skipped:
        kinds = f" (only {', '.join(sorted(others))} lines)" if others else ""
        return f'The file holds no "user" or "assistant" messages{kinds}. {EXPECTED_FILE}'
    quoted = "; ".join(f"line {s.line}: {s.reason}" for s in skipped[:QUOTED_SKIPS])
    more = f"; and {len(skipped) - QUOTED_SKIPS} more" if len(skipped) > QUOTED_SKIPS else ""
    return f"No line of the file could be used ({quoted}{more}). {EXPECTED_FILE}"


def _chains(records: list[Line]) -> list[list[Line]]:
    """Sidechain lines grouped into chains by `parentUuid` (a line whose parent is not a
    sidechain line starts a chain), in the order their first lines appear."""
    chains: list[list[Line]] = []
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
    chains: list[list[Line]], thread: Thread, skipped: list[SkippedLine]
) -> list[Subagent]:
    """Each chain of sidechain lines read as its own thread, placed beside the main one."""
    main_lines = [m.line for m in thread.messages]  # ascending: the thread is in file order
    result_at = _result_positions(thread)
    out: list[Subagent] = []
    for number, chain in enumerate(chains, start=1):
        sub = read_thread(chain, skipped)
        call = _calling_tool_use(sub, thread)
        if call is not None and call in result_at:
            after = result_at[call] + 1
        else:
            after = bisect_left(main_lines, chain[0].number)
        out.append(Subagent(number, chain[0].number, tuple(sub.messages), after, call))
    return out


def _result_positions(thread: Thread) -> dict[str, int]:
    where: dict[str, int] = {}
    for index, message in enumerate(thread.messages):
        for block in message.content:
            if block.get("type") == "tool_result":
                where.setdefault(str(block.get("tool_use_id")), index)
    return where


def _calling_tool_use(sub: Thread, thread: Thread) -> str | None:
    """The main thread's call (Task/Agent) whose prompt is the subagent's first message."""
    first = next((m for m in sub.messages if m.role == "user"), None)
    if first is None:
        return None
    return thread.tool_uses.get(text_of(first.content))
