"""How tokens and cost look in the chat: per answer (in its bubble) and per conversation (header).

An answer's figures come from its row's meta (the usage the API reported for that call); the
conversation's from its ModelCall rows. The demo model's answers say "no cost".
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum
from django.template.loader import render_to_string

from skills_app.core.model_catalog import DEMO_MODEL_ID, get_model
from skills_app.core.pricing import NO_COST, cost_usd, format_usd
from skills_app.models import Message, ModelCall


@dataclass(frozen=True, slots=True)
class UsageFigures:
    """Tokens and cost of one answer or of a whole conversation, ready to show."""

    input_tokens: int  # every prompt token: uncached + written to the cache + read from it
    cache_read: int
    cache_write: int
    output_tokens: int
    cost: str  # "$0.0123", "no cost" or "price unknown (model)"
    model: str = ""
    calls: int = 1
    # The exact amount behind `cost` (None: no cost, or the price is unknown).
    amount: Decimal | None = None

    @property
    def cache_share(self) -> int:
        """Percent of prompt tokens read from the cache."""
        return round(self.cache_read * 100 / self.input_tokens) if self.input_tokens else 0


def _count(usage: dict[str, Any], key: str) -> int:
    value = usage.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


# Aggregates of a ModelCall queryset: the sums and counts `total_cost` and the pages need.
_USED = Q(input_tokens__gt=0) | Q(output_tokens__gt=0)
TOTALS: dict[str, Any] = {
    "calls": Count("pk"),
    "uncached": Sum("input_tokens"),
    "read": Sum("cache_read_input_tokens"),
    "written": Sum("cache_creation_input_tokens"),
    "output": Sum("output_tokens"),
    "cost": Sum("cost_usd"),
    "priced": Count("pk", filter=Q(cost_usd__isnull=False)),
    "unpriced": Count("pk", filter=Q(cost_usd__isnull=True, is_demo=False) & _USED),
    "demo": Count("pk", filter=Q(is_demo=True)),
}


def answer_usage(row: Message) -> UsageFigures | None:
    """The figures of the model call that produced an assistant row; None without usage."""
    usage = row.meta.get("usage") if isinstance(row.meta, dict) else None
    if not isinstance(usage, dict) or not usage:
        return None
    model = str(row.meta.get("model") or "")
    demo = model == DEMO_MODEL_ID or bool(row.run_id and row.run and row.run.is_demo)
    uncached, read = _count(usage, "input_tokens"), _count(usage, "cache_read_input_tokens")
    written = _count(usage, "cache_creation_input_tokens")
    amount: Decimal | None = None
    if demo:
        cost = NO_COST
    else:
        try:
            amount = cost_usd(model, usage, on=row.created_at.date() if row.created_at else None)
        except ValueError:
            amount = None
        cost = format_usd(amount, model=model)
    info = get_model(model)
    return UsageFigures(
        input_tokens=uncached + read + written,
        cache_read=read,
        cache_write=written,
        output_tokens=_count(usage, "output_tokens"),
        cost=cost,
        model="Demo model" if demo else (info.label if info else model),
        amount=amount,
    )


def conversation_usage(conversation_id: int) -> UsageFigures | None:
    """The figures of every model call made for a conversation; None before the first."""
    return _totals(ModelCall.objects.filter(conversation_id=conversation_id))


def render_conversation_cost(conversation_id: int, *, oob: bool = False) -> str:
    """The chat header's cost (id `conversation-cost`); `oob` to swap it in when a run ends."""
    return render_to_string(
        "skills_app/chat/_conversation_cost.html",
        {"cost": conversation_usage(conversation_id), "oob": oob},
    )


def run_cost(run_id: int) -> UsageFigures | None:
    """The figures of a run's model calls (its subagents' are theirs); None without calls."""
    return _totals(ModelCall.objects.filter(run_id=run_id))


def _totals(calls: QuerySet[ModelCall]) -> UsageFigures | None:
    totals = calls.aggregate(**TOTALS)
    if not totals["calls"]:
        return None
    return figures(totals)


def figures(totals: dict[str, Any], *, label: str = "") -> UsageFigures:
    """UsageFigures from a TOTALS aggregate."""
    read, written = totals["read"] or 0, totals["written"] or 0
    return UsageFigures(
        input_tokens=(totals["uncached"] or 0) + read + written,
        cache_read=read,
        cache_write=written,
        output_tokens=totals["output"] or 0,
        cost=total_cost(totals),
        model=label,
        calls=totals["calls"],
    )


def call_usage(call: ModelCall | None) -> UsageFigures | None:
    """The figures of one stored call (None for a request without a stored call)."""
    if call is None:
        return None
    if call.is_demo:
        cost = NO_COST
    elif call.cost_usd is not None:
        cost = format_usd(call.cost_usd)
    elif call.error_kind and not call.input_total:
        cost = f"no usage reported (the call failed: {call.error_kind})"
    else:
        cost = format_usd(None, model=call.model or call.requested_model)
    return UsageFigures(
        input_tokens=call.input_total,
        cache_read=call.cache_read_input_tokens,
        cache_write=call.cache_creation_input_tokens,
        output_tokens=call.output_tokens,
        cost=cost,
        model=call.model or call.requested_model,
    )


def total_cost(totals: dict[str, Any]) -> str:
    """The cost of a group of calls aggregated with TOTALS, in words where there is no amount."""
    if totals["priced"]:
        cost = format_usd(totals["cost"] or Decimal(0))
        if totals["unpriced"]:
            cost += f" (+{totals['unpriced']} calls without a known price)"
        return cost
    if totals["unpriced"]:
        return "price unknown"
    return NO_COST if totals["demo"] else format_usd(Decimal(0))
