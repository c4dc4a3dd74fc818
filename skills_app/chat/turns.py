"""One action row per answer: which assistant row of a turn carries the footer, and its cost.

An answer (a turn) is often several assistant rows: text, tool calls, a skill loading, more text.
The chat shows one footer for it (cost, model, Copy, Regenerate, thumbs), under its last row.
A turn is the rows one run wrote (a regenerated answer is another run, so another turn); rows
without a run (an imported transcript) are each their own turn.

The footer row is decided from the database when a row is rendered: on a page load it is the
run's last row; pushed live it is the newest row so far (the tab drops the footer of the turn's
earlier rows when a later one lands, `static/skillscope/copy.js`). The cost shown is the sum of
the turn's rows up to the footer row, so a reload shows what the live tab showed.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import Max

from skills_app.chat.usage import UsageFigures, answer_usage
from skills_app.core.pricing import NO_COST, format_usd
from skills_app.models import Message

CONTENT_KINDS = ("text", "tool_use")
# The key of the memo in a render's `ctx`: run id -> seq of its last answer row.
LAST_SEQ = "turn_last_seq"
# A render's `ctx` key: rows as stored (the audit), each with its own call's figures, no versions.
AS_STORED = "as_stored"


def in_turn(row: Message) -> bool:
    """An assistant row of the conversation's own thread that an answer's footer may sit under."""
    meta = row.meta if isinstance(row.meta, dict) else {}
    return (
        row.role == Message.ASSISTANT
        and row.kind in CONTENT_KINDS
        and not row.is_meta
        and not meta.get("subagent_run")
        and not meta.get("imported_subagent")
    )


def turn_key(row: Message) -> str:
    """What the rows of one answer share (`data-turn`)."""
    return f"run-{row.run_id}" if row.run_id else f"row-{row.pk}"


def _answer_rows(run_ids: Iterable[int]) -> Any:
    return Message.objects.filter(
        run_id__in=list(run_ids),
        role=Message.ASSISTANT,
        kind__in=CONTENT_KINDS,
        is_meta=False,
        meta__subagent_run__isnull=True,
        meta__imported_subagent__isnull=True,
    )


def last_seqs(rows: Iterable[Message]) -> dict[int, int]:
    """run id -> the seq of its last answer row, for the runs of `rows` (one query)."""
    runs = {row.run_id for row in rows if row.run_id and in_turn(row)}
    if not runs:
        return {}
    found = _answer_rows(runs).values("run_id").annotate(last=Max("seq"))
    return {item["run_id"]: item["last"] for item in found}


def ends_turn(row: Message, ctx: dict[str, Any]) -> bool:
    """`row` is the last row of its answer (as the database has it now)."""
    if not in_turn(row):
        return False
    if not row.run_id:
        return True
    memo = ctx.get(LAST_SEQ)
    if not isinstance(memo, dict) or row.run_id not in memo:
        memo = last_seqs([row])
    return bool(memo.get(row.run_id, row.seq) <= row.seq)


def turn_usage(row: Message) -> UsageFigures | None:
    """Tokens and cost of the answer `row` ends: every row of its run up to it, summed."""
    if not row.run_id:
        return answer_usage(row)
    rows = list(_answer_rows([row.run_id]).filter(seq__lte=row.seq).select_related("run"))
    return summed(answer_usage(r) for r in rows) if rows else None


def summed(figures: Iterable[UsageFigures | None]) -> UsageFigures | None:
    """Figures of several calls as one: tokens added, costs added (in words when none is known)."""
    known = [f for f in figures if f is not None]
    if not known:
        return None
    priced = [f.amount for f in known if f.amount is not None]
    unknown = [f.cost for f in known if f.amount is None and f.cost != NO_COST]
    if priced:
        cost = format_usd(sum(priced, Decimal(0)))
        if unknown:
            cost += f" (+{len(unknown)} calls without a known price)"
    else:
        cost = unknown[-1] if unknown else NO_COST
    models = [f.model for f in known if f.model]
    return UsageFigures(
        input_tokens=sum(f.input_tokens for f in known),
        cache_read=sum(f.cache_read for f in known),
        cache_write=sum(f.cache_write for f in known),
        output_tokens=sum(f.output_tokens for f in known),
        cost=cost,
        model=models[-1] if models else "",
        calls=len(known),
    )


# --- Versions of an answer ---------------------------------------------------------------------
#
# Regenerate marks the latest answer's rows replaced (`replaced_by: "regenerate"`, one
# `replaced_at` per regeneration) and a new run answers the same message. The rows after one of
# the person's messages are then versions of its answer: each regeneration's rows one version,
# oldest first, and the rows written since the last one the newest. The chat shows the newest
# and offers "‹ 2/3 ›" on each version's footer; a replaced run's notices ("Stopped.") belong to
# its version. What the model is sent is untouched: the replaced rows stay excluded.

VERSIONS = "answer_versions"  # the key of the memo in a render's `ctx`


@dataclass(frozen=True, slots=True)
class Version:
    answer: int  # the seq of the person's message the versions answer
    number: int  # 1 = the oldest
    count: int
    later: bool = False  # not the version's first row (which carries its "replaced" note)
    # The newest version has no answer row (its run failed or is still writing): its notes carry
    # the versions control, or the older ones would be out of reach.
    bare: bool = False

    @property
    def newest(self) -> bool:
        return self.number == self.count


def _typed(conversation_id: int) -> list[tuple[int, str | None]]:
    """(seq, how it was replaced) of the person's messages (what starts a turn), in order."""
    rows = Message.objects.filter(
        conversation_id=conversation_id,
        role=Message.USER,
        kind__in=("text", "command"),
        is_meta=False,
        meta__subagent_run__isnull=True,
        meta__subagent_result__isnull=True,
    )
    return list(rows.order_by("seq").values_list("seq", "meta__replaced_by"))


@dataclass(frozen=True, slots=True)
class VersionMap:
    """Which version of which answer each row after a regenerated answer's question belongs to."""

    starts: tuple[int, ...]  # seqs of the person's messages
    # answer seq -> the seq of the first row of each replaced version, and of the newest's
    bounds: dict[int, tuple[int, ...]]
    # answers whose newest version has no answer row yet
    bare: frozenset[int] = frozenset()

    def of(self, row: Message) -> Version | None:
        i = bisect_left(self.starts, row.seq) - 1
        if i < 0:
            return None
        answer = self.starts[i]
        bounds = self.bounds.get(answer)
        if not bounds or row.seq < bounds[0]:
            return None  # no regenerated answer, or a row of the question's own (its files)
        number = bisect_right(bounds, row.seq)
        later = row.seq != bounds[number - 1]
        bare = number == len(bounds) and answer in self.bare
        return Version(answer=answer, number=number, count=len(bounds), later=later, bare=bare)


def version_map(conversation_id: int) -> VersionMap:
    """The versions of every regenerated answer of a conversation (at most three queries)."""
    regenerated = Message.objects.filter(
        conversation_id=conversation_id, meta__replaced_by="regenerate"
    ).order_by("seq")
    typed = _typed(conversation_id)
    starts = [seq for seq, _how in typed]
    # An edited question's answers are one replaced branch, shown whole.
    edited = {seq for seq, how in typed if how == "edit"}
    firsts: dict[int, list[int]] = {}
    last_at: dict[int, str] = {}
    last_seq: dict[int, int] = {}
    for seq, at in regenerated.values_list("seq", "meta__replaced_at"):
        i = bisect_left(starts, seq) - 1
        if i < 0:
            continue
        answer = starts[i]
        if answer in edited:
            continue
        if last_at.get(answer) != at:
            firsts.setdefault(answer, []).append(seq)
            last_at[answer] = at
        last_seq[answer] = seq
    # The newest version starts after the last replaced row.
    bounds = {a: (*seqs, last_seq[a] + 1) for a, seqs in firsts.items()}
    bare = set(bounds)
    if bounds:
        answered = Message.objects.filter(
            conversation_id=conversation_id,
            role=Message.ASSISTANT,
            kind__in=CONTENT_KINDS,
            is_meta=False,
            seq__gte=min(b[-1] for b in bounds.values()),
        )
        for seq in answered.values_list("seq", flat=True):
            answer = starts[bisect_left(starts, seq) - 1]
            if answer in bounds and seq >= bounds[answer][-1]:
                bare.discard(answer)
    return VersionMap(starts=tuple(starts), bounds=bounds, bare=frozenset(bare))


def version_of(row: Message, ctx: dict[str, Any]) -> Version | None:
    """The version of an answer `row` belongs to; None outside a regenerated answer."""
    found = ctx.get(VERSIONS)
    if not isinstance(found, VersionMap):
        found = version_map(row.conversation_id)
    if isinstance(row.meta, dict) and row.meta.get("replaced_by") == "edit":
        return None  # an edited branch is shown as replaced, whole
    return found.of(row)
