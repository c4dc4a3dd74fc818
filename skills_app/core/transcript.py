"""Stored messages and the pure function that turns them into the Messages API `messages` list.

The request the model sees is rebuilt from stored rows every time, so "what the model saw" can be
reproduced from the database for any request.

Excluded turns. A user turn that failed (a ModelError) or was refused (`stop_reason: "refusal"`)
stays in the transcript for the user to see, but must not reach the model again, or every later
message would repeat it. Its rows get `meta["excluded"] = "failed" | "refusal"`; `to_api_messages`
skips them (as it skips `to_model=False` rows, which are never for the model). The contract:

- when a run ends failed or refused, the loop (through `RunPorts.exclude_turn`) stores the rows
  `exclude_turn(rows, turn_start(rows), reason)` returns: every model-bound row of the latest
  user turn (the user's message or slash-command rows, assistant rows, tool results, hidden skill
  messages, and the state rows a profile merges into the system prompt), marked. Notices
  (`to_model=False`) need no mark.
- Retry on the latest turn stores the rows `retry_turn(rows)` returns (the turn unmarked, except
  partial or refused assistant output, so the history ends with a user row) and runs the loop
  without new user text; the model continues where the turn failed.
- Once the user sends a new message, older excluded turns stay excluded: `retry_turn` returns
  nothing for them, so their Retry buttons go away.

Replaced turns. Editing one of the person's messages replaces it and everything after it (the
later turns become a replaced branch); regenerating replaces the latest turn's answer (from its
first assistant row). `replace_rows` marks those rows
`excluded = "replaced"` with when and how (`replaced_at`, `replaced_by`): kept for the audit and
shown compactly, never sent to the model again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

STATUS_TEMPLATE = '<command-message>The "{name}" skill is loading</command-message>'
HIDDEN_PREFIX = "Base directory for this skill: "
# Tool results are cut in live events to what a card shows (the chat's cards show this much and
# link to the rest; the stored row keeps them whole).
LIVE_RESULT_CHARS = 4_000
INTERRUPTED_RESULT = "Interrupted: the run was stopped before this tool call finished."
# A stop by the person: the call is closed for the API, and the model is told not to pick it up
# again on its own (the person's next message is a new request, not a go-ahead for this call).
STOPPED_RESULT = (
    "Stopped by the user before this tool call finished: it may not have run, or only in part. "
    "Do not run it again unless the user asks for it; answer their next message."
)
EXCLUDED = "excluded"  # meta key; its value says why ("failed" or "refusal")
EXCLUDED_TURN_START = "excluded_turn_start"  # meta key on the first row of an excluded turn
REPLACED = "replaced"  # an exclusion reason: the person edited the message or regenerated
EXCLUSION_REASONS = ("failed", "refusal", REPLACED)
# Rows that are not messages but shape the request all the same: the system-prompt profile merges
# loaded skills into the system prompt from them. An excluded turn excludes them too.
STATE_KIND = "skill_state"
# meta key: this row's thinking blocks were signed for another API key (an imported transcript).
# They are shown and exported, never sent: the API would reject their signatures.
FOREIGN_THINKING = "foreign_thinking"
THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})


def text_of(blocks: Iterable[Any], sep: str = "\n") -> str:
    """The text of the text blocks among `blocks`, joined by `sep`; other blocks are skipped."""
    return sep.join(
        str(b.get("text", "")) for b in blocks if isinstance(b, dict) and b.get("type") == "text"
    )


def is_empty_text(block: Mapping[str, Any]) -> bool:
    """A text block without text: the API rejects it in a request."""
    return block.get("type") == "text" and not block.get("text")


def result_text(block: Mapping[str, Any]) -> str:
    """What a tool_result says: its string content, or the text of its content blocks."""
    content = block.get("content", "")
    return text_of(content) if isinstance(content, list) else str(content)


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """One stored row, as the core sees it."""

    role: str
    content: tuple[dict[str, Any], ...]
    kind: str = "text"
    is_meta: bool = False
    to_model: bool = True
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def text(cls, role: str, text: str, **kwargs: Any) -> StoredMessage:
        return cls(role=role, content=({"type": "text", "text": text},), **kwargs)

    @property
    def plain_text(self) -> str:
        return text_of(self.content)

    @property
    def excluded(self) -> bool:
        """Left out of the model's history (a failed or refused turn)."""
        return bool(self.meta.get(EXCLUDED))

    @property
    def sent_to_model(self) -> bool:
        """Part of what the model sees: a model-bound row of a turn that is not excluded."""
        return self.to_model and not self.excluded

    @property
    def model_bound(self) -> bool:
        """Reaches the model when its turn is not excluded: a message, or request state."""
        return self.to_model or self.kind == STATE_KIND


def status_message_text(name: str, args: str) -> str:
    """The visible status message for an invoked skill (rendered as a chip, never as raw tags)."""
    lines = [STATUS_TEMPLATE.format(name=name), f"<command-name>{name}</command-name>"]
    if args:
        lines.append(f"<command-args>{args}</command-args>")
    return "\n".join(lines)


def parse_status_message(text: str) -> dict[str, str] | None:
    """Read name and args back from a status message; None if the text is not one."""
    if not text.startswith("<command-message>"):
        return None
    name = _between(text, "<command-name>", "</command-name>")
    if name is None:
        return None
    return {"name": name, "args": _between(text, "<command-args>", "</command-args>") or ""}


def _between(text: str, start: str, end: str) -> str | None:
    i = text.find(start)
    if i < 0:
        return None
    j = text.find(end, i + len(start))
    if j < 0:
        return None
    return text[i + len(start) : j]


def _clean_block(block: dict[str, Any], *, foreign_thinking: bool) -> dict[str, Any] | None:
    """Drop blocks the API would reject when replayed (empty text, thinking signed elsewhere)."""
    if is_empty_text(block):
        return None
    if foreign_thinking and block.get("type") in THINKING_TYPES:
        return None
    return block


def to_api_messages(rows: Iterable[StoredMessage]) -> list[dict[str, Any]]:
    """Rows sent to the model in order, consecutive same-role rows merged, tool_result blocks first.

    Blocks pass through unchanged (a copy of each), thinking and redacted_thinking blocks with
    their signature included: the API rejects a continued tool loop whose thinking was altered.
    """
    turns: list[dict[str, Any]] = []
    for row in rows:
        if not row.sent_to_model:
            continue
        foreign = bool(row.meta.get(FOREIGN_THINKING))
        cleaned = (_clean_block(dict(b), foreign_thinking=foreign) for b in row.content)
        blocks = [b for b in cleaned if b is not None]
        if not blocks:
            continue
        if turns and turns[-1]["role"] == row.role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": row.role, "content": blocks})
    for turn in turns:
        if turn["role"] == "user":
            results = [b for b in turn["content"] if b.get("type") == "tool_result"]
            others = [b for b in turn["content"] if b.get("type") != "tool_result"]
            turn["content"] = results + others
    _answer_orphans(turns)
    # The API rejects a conversation that starts with the assistant.
    while turns and turns[0]["role"] != "user":
        turns.pop(0)
    if turns and turns[-1]["role"] == "assistant":
        _strip_trailing_whitespace(turns[-1])
    return turns


def _answer_orphans(turns: list[dict[str, Any]]) -> None:
    """Guarantee every tool_use has a tool_result in the next user turn (defence in depth)."""
    for i, turn in enumerate(turns):
        if turn["role"] != "assistant":
            continue
        ids = [b["id"] for b in turn["content"] if b.get("type") == "tool_use"]
        if not ids:
            continue
        if i + 1 < len(turns):
            nxt = turns[i + 1]
        else:
            continue  # the last assistant turn: the loop is about to answer it
        answered = {b.get("tool_use_id") for b in nxt["content"] if b.get("type") == "tool_result"}
        missing = [
            {
                "type": "tool_result",
                "tool_use_id": tid,
                "content": INTERRUPTED_RESULT,
                "is_error": True,
            }
            for tid in ids
            if tid not in answered
        ]
        if missing:
            results = [b for b in nxt["content"] if b.get("type") == "tool_result"]
            others = [b for b in nxt["content"] if b.get("type") != "tool_result"]
            nxt["content"] = results + missing + others


def _strip_trailing_whitespace(turn: dict[str, Any]) -> None:
    content = turn["content"]
    if content and content[-1].get("type") == "text":
        stripped = content[-1]["text"].rstrip()
        if stripped:
            content[-1] = {**content[-1], "text": stripped}
        else:
            content.pop()
    if not content:
        content.append({"type": "text", "text": "(no content)"})


def unanswered_tool_uses(rows: Sequence[StoredMessage]) -> list[dict[str, Any]]:
    """tool_use blocks of the last assistant message that no later row answers."""
    last_assistant = None
    for i in range(len(rows) - 1, -1, -1):
        if rows[i].role == "assistant" and rows[i].sent_to_model:
            last_assistant = i
            break
    if last_assistant is None:
        return []
    uses = [b for b in rows[last_assistant].content if b.get("type") == "tool_use"]
    answered = {
        b.get("tool_use_id")
        for row in rows[last_assistant + 1 :]
        for b in row.content
        if b.get("type") == "tool_result"
    }
    return [b for b in uses if b["id"] not in answered]


def close_open_tool_uses(
    rows: Sequence[StoredMessage],
    *,
    answered: Iterable[str] = (),
    content: str = INTERRUPTED_RESULT,
) -> list[dict[str, Any]]:
    """An error tool_result saying `content` for every open tool_use of the last assistant message.

    Open means no later row answers it and its id is not in `answered` (results not stored yet).
    A stopped run (`STOPPED_RESULT`), a cancelled tool turn and the recovery of a dead run all
    close their history with this, so the next request is valid for the API.
    """
    done = set(answered)
    return [
        tool_result_block(b["id"], content, is_error=True)
        for b in unanswered_tool_uses(rows)
        if b["id"] not in done
    ]


def tool_result_block(
    tool_use_id: str,
    content: str,
    *,
    is_error: bool = False,
    blocks: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """A tool_result: its text, or (with `blocks`, such as images) a text block and those."""
    body: Any = content
    if blocks:
        body = [{"type": "text", "text": content}, *(dict(b) for b in blocks)]
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": body}
    if is_error:
        block["is_error"] = True
    return block


def turn_start(rows: Sequence[StoredMessage]) -> int | None:
    """Index of the first row of the latest user turn (its message or slash command), or None.

    A turn starts at a visible user row (not a tool result) that follows an assistant row or
    nothing, counting only rows the model sees; a turn's later user rows (tool results, skill
    messages of a model call) follow a user row and do not start one.
    """
    previous_role: str | None = None
    start: int | None = None
    for i, row in enumerate(rows):
        if not row.sent_to_model:
            continue
        if (
            row.role == "user"
            and not row.is_meta
            and previous_role != "user"
            and not any(b.get("type") == "tool_result" for b in row.content)
        ):
            start = i
        previous_role = row.role
    return start


def exclude_turn(
    rows: Sequence[StoredMessage], start: int | None, reason: str
) -> dict[int, StoredMessage]:
    """The rows to store again when the turn starting at `start` failed or was refused.

    index -> the row marked excluded for `reason`; the first also carries `EXCLUDED_TURN_START`,
    so a later Retry finds where the turn began even when excluded turns follow each other.
    """
    if reason not in EXCLUSION_REASONS:
        raise ValueError(f"Unknown exclusion reason {reason!r}: use one of {EXCLUSION_REASONS}.")
    if start is None:
        return {}
    changes: dict[int, StoredMessage] = {}
    for i in range(start, len(rows)):
        if rows[i].model_bound and not rows[i].excluded:
            marked = with_exclusion(rows[i], reason)
            if not changes:
                marked = replace(marked, meta={**marked.meta, EXCLUDED_TURN_START: True})
            changes[i] = marked
    return changes


def retry_turn(rows: Sequence[StoredMessage]) -> dict[int, StoredMessage]:
    """The rows to store again when the user retries the latest excluded turn.

    index -> the row with its mark cleared. Partial answers (`meta["partial"]`) and refused output
    stay excluded, and so does anything after the turn's last user row, so the history the loop
    continues from ends with the user. Empty when the latest turn is not excluded.
    """
    start = next(
        (i for i in range(len(rows) - 1, -1, -1) if rows[i].meta.get(EXCLUDED_TURN_START)), None
    )
    if start is None or any(r.sent_to_model for r in rows[start:]):
        return {}  # nothing excluded, or a newer turn went on since: its Retry is stale
    chosen = [
        i
        for i in range(start, len(rows))
        if rows[i].excluded
        and rows[i].model_bound
        and not rows[i].meta.get("partial")
        and rows[i].meta.get("stop_reason") != "refusal"
    ]
    while chosen and rows[chosen[-1]].role != "user":
        chosen.pop()
    return {i: with_exclusion(rows[i], None) for i in chosen}


def with_exclusion(row: StoredMessage, reason: str | None) -> StoredMessage:
    """A copy of `row` marked excluded for `reason` ("failed" / "refusal"), or unmarked for None."""
    if reason is not None and reason not in EXCLUSION_REASONS:
        raise ValueError(f"Unknown exclusion reason {reason!r}: use one of {EXCLUSION_REASONS}.")
    meta = {k: v for k, v in row.meta.items() if k not in (EXCLUDED, EXCLUDED_TURN_START)}
    if reason is not None:
        meta[EXCLUDED] = reason
    return replace(row, meta=meta)


def typed_by_user(row: StoredMessage) -> bool:
    """A message the person typed (or a slash command): it starts a new turn for them."""
    return (
        row.role == "user"
        and not row.is_meta
        and row.kind in ("text", "command")
        and not row.meta.get("subagent_result")
        and not row.meta.get("subagent_run")
    )


def ends_with_user(rows: Sequence[StoredMessage]) -> bool:
    """The model-bound history ends with the user: the loop can answer it as it stands."""
    messages = to_api_messages(rows)
    return bool(messages) and messages[-1]["role"] == "user"


def can_retry(rows: Sequence[StoredMessage]) -> bool:
    """Retry would send something: the latest turn is excluded, or the history awaits an answer."""
    return bool(retry_turn(rows)) or ends_with_user(rows)


def retry_notice(rows: Sequence[StoredMessage]) -> int | None:
    """Index of the one notice that offers Retry: the latest turn's last retryable notice, if any.

    Notices of turns the user went on from (a newer typed message) offer nothing.
    """
    for i in range(len(rows) - 1, -1, -1):
        row = rows[i]
        if typed_by_user(row):
            return None
        if not row.to_model and row.meta.get("retry"):
            return i if can_retry(rows) else None
    return None


def edit_start(rows: Sequence[StoredMessage]) -> int | None:
    """Index of the person's latest message (typed or a slash command): what Edit replaces."""
    for i in range(len(rows) - 1, -1, -1):
        if typed_by_user(rows[i]):
            return None if rows[i].meta.get(EXCLUDED) == REPLACED else i
    return None


def editable(rows: Sequence[StoredMessage], index: int) -> bool:
    """The row at `index` is one of the person's messages that Edit may replace (any of them,
    not only the latest: the later turns become a replaced branch, kept for the audit)."""
    return 0 <= index < len(rows) and typed_by_user(rows[index]) and not _replaced(rows[index])


def _replaced(row: StoredMessage) -> bool:
    return row.meta.get(EXCLUDED) == REPLACED


def regenerate_start(rows: Sequence[StoredMessage]) -> int | None:
    """Index of the first answer row of the latest turn (what Regenerate replaces), or None.

    None when the turn has no answer the model sees (still running, or failed: that is Retry).
    """
    start = edit_start(rows)
    if start is None:
        return None
    for i in range(start + 1, len(rows)):
        if rows[i].role == "assistant" and rows[i].sent_to_model:
            return i
    return None


def replace_rows(
    rows: Sequence[StoredMessage], start: int, *, how: str, at: str
) -> dict[int, StoredMessage]:
    """index -> the row marked replaced (`how`: "edit" or "regenerate", `at`: ISO time).

    Every row from `start` on, visible or hidden, model-bound or not: the chat shows them as
    replaced and the model never sees them again.
    """
    changes: dict[int, StoredMessage] = {}
    for i in range(start, len(rows)):
        if rows[i].meta.get(EXCLUDED) == REPLACED:
            continue
        marked = with_exclusion(rows[i], REPLACED)
        changes[i] = replace(marked, meta={**marked.meta, "replaced_at": at, "replaced_by": how})
    return changes
