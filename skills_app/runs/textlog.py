"""The streamed text the event log holds and no stored row holds yet (`text.saved` pieces).

A tab that connects or resumes mid-answer starts each open stream from this text, then follows
the live pieces by offset; recovery turns the text of an interrupted run into its partial answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from skills_app.core.events import EVENT_TYPES, MessageStored, ModelCalled, TextSaved, ThinkingSaved
from skills_app.models import Run, RunEvent


@dataclass(frozen=True, slots=True)
class StreamedBlock:
    """Text a run streamed into one block of its current model call and no row holds yet."""

    run_id: int
    call: int
    index: int
    kind: str  # text | thinking
    text: str


# Saved pieces (the stored event types that carry a stream), and the `text.delta` rows that event
# logs written before live streaming still hold.

_SAVED_TYPES = {
    cls.type: cls.stream for cls in EVENT_TYPES.values() if cls.stored and cls.stream
} | {"text.delta": "text"}

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
