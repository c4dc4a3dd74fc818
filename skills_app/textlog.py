"""The streamed text of answers in progress: what no stored row holds yet (`StreamPiece` rows).

Every frame of streamed text is committed as a piece before it is sent (`runs.streams`), so
these rows hold at least everything any tab was shown. A tab that connects or resumes
mid-answer starts each open stream from this text, then follows the live pieces by offset; a
tab that finds a hole reads it from here; recovery turns the text of an interrupted run into its
partial answer. The rows of a run go once its answer is stored.

It sits below `runs`, with the rows: runs write the pieces, and a tab reads them back on the way
out without calling into runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, NamedTuple

from django.db import connection, transaction
from django.db.models import Field

from skills_app.core.events import MessageStored, ModelCalled
from skills_app.models import Run, RunEvent, StreamPiece

# The most characters one piece or live frame of streamed text carries: 16,000 characters are at
# most 64 KB of UTF-8 (+ JSON quoting of the odd quote or backslash), within the largest frame
# the consumer itself accepts.
LIVE_FRAME_CHARS = 16_000


@dataclass(frozen=True, slots=True)
class StreamedBlock:
    """Text a run streamed into one block of its current model call and no row holds yet."""

    run_id: int
    call: int
    index: int
    kind: str  # text | thinking
    text: str


_RESETS = {ModelCalled.type, MessageStored.type, "message"}


class Piece(NamedTuple):
    """One `StreamPiece` row to write, in the order of `_COLUMNS`."""

    run_id: int
    call: int
    block: int  # the column `index` (a tuple has a method of that name)
    kind: str  # text | thinking
    offset: int
    text: str


def append_pieces(pieces: Sequence[Piece]) -> None:
    """Commit streamed pieces (the live text's journal, `runs.streams`) in one transaction.

    One multi-row INSERT per ROWS_PER_INSERT pieces, not `bulk_create` and not `executemany`:
    the ORM made a model instance per row and compiled every field of every row, and
    `executemany` steps the statement once per row, giving the interpreter lock up and waiting
    for it again each time. While the event loop keeps that lock busy (many streams), each wait
    lasts up to the switch interval, several times the commit's own CPU (bench/PROFILE.md), and
    every frame waits for its commit before it is sent.
    """
    if not pieces:
        return
    with transaction.atomic(), connection.cursor() as cursor:
        for start in range(0, len(pieces), ROWS_PER_INSERT):
            rows = pieces[start : start + ROWS_PER_INSERT]
            values = [value for piece in rows for value in piece]
            cursor.execute(_insert_sql(connection.vendor, len(rows)), values)


_COLUMNS = ("run", "call", "index", "kind", "offset", "text")
# 100 rows of 6 values: far below SQLite's and PostgreSQL's limits on parameters per statement.
ROWS_PER_INSERT = 100


@cache
def _insert_sql(vendor: str, rows: int) -> str:
    # `vendor` keys the cache: the quoting is the backend's.
    quote = connection.ops.quote_name
    fields = [StreamPiece._meta.get_field(name) for name in _COLUMNS]
    columns = ", ".join(quote(field.column) for field in fields if isinstance(field, Field))
    marks = "(" + ", ".join(["%s"] * len(_COLUMNS)) + ")"
    table = quote(StreamPiece._meta.db_table)
    return f"INSERT INTO {table} ({columns}) VALUES " + ", ".join([marks] * rows)


def _joined(pieces: Iterable[tuple[int, str]]) -> str:
    """The text of pieces in offset order (each starts where the text so far ends, or inside it)."""
    text = ""
    for offset, piece in pieces:
        if offset <= len(text) < offset + len(piece):
            text += piece[len(text) - offset :]
    return text


def streamed_blocks(run_id: int, *, upto_seq: int | None = None) -> list[StreamedBlock]:
    """What the run's current model call streamed and no stored row holds yet, per block.

    The current call is the one the run's latest `model.call` event started; a message stored
    after it holds everything streamed before it.
    """
    events = RunEvent.objects.filter(run_id=run_id, type__in=_RESETS)
    if upto_seq is not None:
        events = events.filter(seq__lte=upto_seq)
    latest = events.order_by("-seq").values_list("type", "data").first()
    if latest is not None and latest[0] != ModelCalled.type:
        return []
    call = int(latest[1].get("call") or 0) if latest is not None else 0
    blocks: dict[tuple[int, str], list[tuple[int, str]]] = {}
    pieces = StreamPiece.objects.filter(run_id=run_id, call=call).order_by("offset", "pk")
    for index, kind, offset, text in pieces.values_list("index", "kind", "offset", "text"):
        blocks.setdefault((index, kind), []).append((offset, text))
    return [
        StreamedBlock(run_id=run_id, call=call, index=index, kind=kind, text=_joined(parts))
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
    """The text of one streamed block committed so far (everything any tab was sent of it)."""
    pieces = StreamPiece.objects.filter(run_id=run_id, call=call, index=index, kind=kind)
    return _joined(pieces.order_by("offset", "pk").values_list("offset", "text"))


def open_streams(conversation_id: int, *, upto_seq: int | None = None) -> list[StreamedBlock]:
    """The saved text of every block the conversation's active runs are streaming."""
    active = Run.objects.filter(conversation_id=conversation_id, status__in=Run.ACTIVE)
    return [
        block
        for run_id in active.order_by("pk").values_list("pk", flat=True)
        for block in streamed_blocks(run_id, upto_seq=upto_seq)
    ]


def forget_pieces(run_ids: Iterable[int] | None = None) -> int:
    """Delete the streamed pieces of these runs, or (None) of every run that is not active."""
    if run_ids is None:
        pieces = StreamPiece.objects.exclude(run__status__in=Run.ACTIVE)
    else:
        pieces = StreamPiece.objects.filter(run_id__in=list(run_ids))
    deleted, _ = pieces.delete()
    return deleted
