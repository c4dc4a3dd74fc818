"""One thread of a Claude Code session file (the main one, or a subagent's chain), line by line.

The rules are in `cc_transcript`'s docstring: lines of one `message.id` merged (a repeated block
kept once), results paired with the calls of the assistant message before them, a line that
cannot be used skipped with its reason, skill prompts hidden whatever their flags say.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .transcript import (
    FOREIGN_THINKING,
    HIDDEN_PREFIX,
    THINKING_TYPES,
    StoredMessage,
    parse_status_message,
    text_of,
    to_api_messages,
)

MESSAGE_TYPES = ("user", "assistant")
BLOCK_TYPES = frozenset({"text", "tool_use", "tool_result", "image", "document", *THINKING_TYPES})
# Kinds taken from the file as given (our own exports write them); others are inferred.
KEPT_KINDS = {"error": "assistant", "notice": "assistant", "command": "user"}
# The flags that mark a user line as text the model got but the person never typed.
HIDDEN_FLAGS = ("isMeta", "isSynthetic")


class LineError(Exception):
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
class Line:
    number: int
    record: dict[str, Any]
    sidechain: bool


# -- one thread ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Thread:
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


def read_thread(lines: list[Line], skipped: list[SkippedLine]) -> Thread:
    thread = Thread()
    for line in lines:
        try:
            _add_line(thread, line)
        except LineError as exc:
            skipped.append(SkippedLine(line.number, str(exc)))
            _remember_skipped_calls(thread, line)
    return thread


def _remember_skipped_calls(thread: Thread, line: Line) -> None:
    body = line.record.get("message")
    content = body.get("content") if isinstance(body, dict) else None
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "tool_use":
            tid = block.get("id")
            if isinstance(tid, str):
                thread.skipped_calls.setdefault(tid, line.number)


def _add_line(thread: Thread, line: Line) -> None:
    record = line.record
    role = record["type"]
    body = record.get("message")
    if not isinstance(body, dict):
        raise LineError('"message" is not an object with role and content')
    if body.get("role", role) != role:
        raise LineError(f'"message.role" is {body.get("role")!r} but "type" is {role!r}')
    raw_content = body.get("content")
    if isinstance(raw_content, str):
        raw_content = [{"type": "text", "text": raw_content}] if raw_content else []
    if not isinstance(raw_content, list):
        raise LineError('"message.content" is neither text nor a list of blocks')
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
        raise LineError(f'"{key}" is {value!r}, not true or false')
    return value


def _already_in(block: dict[str, Any], content: list[dict[str, Any]]) -> bool:
    """A block a later line of the same message repeats (same call id, or identical)."""
    if block["type"] == "tool_use":
        return any(b.get("type") == "tool_use" and b.get("id") == block["id"] for b in content)
    return block in content


def _checked_block(index: int, role: str, block: Any) -> dict[str, Any]:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise LineError(f"content block {index} has no type")
    kind = block["type"]
    where = f"content block {index} ({kind})"
    if kind not in BLOCK_TYPES:
        raise LineError(
            f"{where} is not a block type this app stores ({', '.join(sorted(BLOCK_TYPES))})"
        )
    if kind == "text" and not isinstance(block.get("text"), str):
        raise LineError(f'{where}: "text" is not a string')
    if kind in THINKING_TYPES and role != "assistant":
        raise LineError(f"{where}: only assistant messages think")
    if kind == "thinking" and not (
        isinstance(block.get("thinking"), str) and isinstance(block.get("signature", ""), str)
    ):
        raise LineError(f'{where}: "thinking" and "signature" are not strings')
    if kind == "redacted_thinking" and not isinstance(block.get("data"), str):
        raise LineError(f'{where}: "data" is not a string')
    if kind == "tool_use":
        if role != "assistant":
            raise LineError(f"{where}: only assistant messages call tools")
        tid, name = block.get("id"), block.get("name")
        if not isinstance(tid, str) or not tid or not isinstance(name, str) or not name:
            raise LineError(f'{where}: needs a string "id" and "name"')
        if not isinstance(block.get("input", {}), dict):
            raise LineError(f'{where}: "input" is not an object')
    if kind == "tool_result":
        if role != "user":
            raise LineError(f"{where}: tool results belong to user messages")
        if not isinstance(block.get("tool_use_id"), str):
            raise LineError(f'{where}: "tool_use_id" is not a string')
        inner = block.get("content", "")
        if not isinstance(inner, str | list):
            raise LineError(f'{where}: "content" is neither text nor a list')
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
    thread: Thread,
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
                raise LineError(f"tool call id {tid} was already used on line {thread.calls[tid]}")
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
            raise LineError(
                f"the tool result for {tid} answers a call on line {thread.skipped_calls[tid]}, "
                "which was skipped"
            )
        if tid not in thread.calls:
            raise LineError(f"the tool result for {tid} answers no earlier tool call")
        if tid in thread.answered or tid in seen:
            raise LineError(f"the tool call {tid} is answered twice")
        if tid not in thread.open:
            raise LineError(
                f"the tool result for {tid} (called on line {thread.calls[tid]}) does not follow "
                "its call: another assistant message came between them"
            )
        seen.add(tid)
    thread.answered |= seen


def _looks_like_skill_prompt(content: list[dict[str, Any]]) -> bool:
    first = next((b for b in content if b["type"] == "text"), None)
    return first is not None and str(first["text"]).startswith(HIDDEN_PREFIX)


def _kind(
    role: str, content: list[dict[str, Any]], given: Any, is_meta: bool, thread: Thread
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


# What an imported call without a result is answered with, so the next request is valid.
UNFINISHED_CALL = (
    "Not run in this import: the session file ends before this tool call's result, and the tool "
    "calls of an imported session are never run again."
)
# The last words of a file that stops inside a tool turn: a visible note, sent as the model's.
TOOL_TURN_NOTE = "The imported session file ends here, {what}. A new message continues from here."


def close_open_calls(thread: Thread) -> int:
    """Answer the last assistant message's calls that the file never answers; how many.

    The model may only be sent a history where every call has its result; a session cut off
    mid-turn (the file ends, or the result line was skipped) would make the next request fail.
    """
    if thread.current_index < 0:
        return 0
    last = thread.messages[thread.current_index]
    missing = [
        b["id"] for b in last.content if b["type"] == "tool_use" and b["id"] not in thread.answered
    ]
    if not missing or not last.to_model:
        return 0
    blocks = [
        {"type": "tool_result", "tool_use_id": tid, "content": UNFINISHED_CALL, "is_error": True}
        for tid in missing
    ]
    # Placed (and numbered, for the order subagents are placed in) after the file's last message.
    at = thread.messages[-1].line
    closing = ImportedMessage(at, "user", blocks, False, True, "tool_result", 0, ())
    thread.messages.append(closing)
    thread.answered |= set(missing)
    return len(missing)


def close_tool_turn(thread: Thread, closed_calls: int) -> None:
    """End a thread that stops inside a tool turn with a note, sent as the assistant's message.

    Without it a new message would share the user turn of those tool results and continue that
    turn, and with thinking on the API refuses to continue a tool turn that did not start with a
    thinking block: an imported turn never does (another key's thinking is not sent). After the
    note the new message starts a turn of its own, whatever the model and its thinking.
    """
    history = [
        StoredMessage(
            role=m.role,
            content=tuple(m.content),
            kind=m.kind,
            is_meta=m.is_meta,
            to_model=m.to_model,
            meta={FOREIGN_THINKING: True} if m.thinking_blocks else {},
        )
        for m in thread.messages
    ]
    sent = to_api_messages(history)
    if not sent or sent[-1]["role"] != "user":
        return
    if not any(b.get("type") == "tool_result" for b in sent[-1]["content"]):
        return
    if closed_calls:
        calls = (
            "1 tool call: it was" if closed_calls == 1 else f"{closed_calls} tool calls: they were"
        )
        what = f"before the results of {calls} not run in this import"
    else:
        what = "before the model answered the tool results above"
    text = TOOL_TURN_NOTE.format(what=what)
    at = thread.messages[-1].line
    note = ImportedMessage(at, "assistant", [{"type": "text", "text": text}], False, True, "notice")
    thread.messages.append(note)
