"""What a model call cost, in US dollars, from the API's usage figures and the model table.

Usage as the API reports it (and the adapter stores it): `input_tokens` is the uncached remainder
only; `cache_creation_input_tokens` were written to the cache (5-minute price unless the
`cache_creation` breakdown says some were 1-hour writes); `cache_read_input_tokens` were read
from it; `output_tokens` include thinking.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from decimal import Decimal
from typing import Any

from .model_catalog import DEMO_MODEL_ID, model_family

MILLION = Decimal(1_000_000)
USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)
NO_COST = "no cost"


def _tokens(usage: Mapping[str, Any], key: str) -> int:
    value = usage.get(key) or 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"usage[{key!r}] must be a whole number of tokens >= 0, not {value!r}")
    return value


def cost_usd(model: str, usage: Mapping[str, Any], *, on: date | None = None) -> Decimal | None:
    """Exact USD cost of one call; None when nothing is owed (demo) or the price is unknown."""
    if model == DEMO_MODEL_ID:
        return None
    info = model_family(model)
    if info is None:
        return None
    prices = info.prices_on(on)
    written = _tokens(usage, "cache_creation_input_tokens")
    written_1h = 0
    breakdown = usage.get("cache_creation")
    if isinstance(breakdown, Mapping):
        # Only the 1-hour part changes the price; the rest are 5-minute writes.
        written_1h = min(written, _tokens(breakdown, "ephemeral_1h_input_tokens"))
    total = (
        _tokens(usage, "input_tokens") * prices.input
        + _tokens(usage, "output_tokens") * prices.output
        + (written - written_1h) * prices.cache_write
        + written_1h * prices.cache_write_1h
        + _tokens(usage, "cache_read_input_tokens") * prices.cache_read
    )
    return total / MILLION


def is_free(model: str) -> bool:
    """True for the offline demo model, whose answers cost nothing."""
    return model == DEMO_MODEL_ID


def format_usd(amount: Decimal | None, *, model: str = "") -> str:
    """`$0.0123` (4 decimals, more when smaller than a hundredth of a cent); "no cost" for None."""
    if amount is None:
        if model and not is_free(model) and model_family(model) is None:
            return f"price unknown ({model})"
        return NO_COST
    places = Decimal("0.0001") if amount == 0 or amount >= Decimal("0.0001") else Decimal("1e-6")
    return f"${amount.quantize(places)}"


def input_total(usage: Mapping[str, Any]) -> int:
    """All prompt tokens of a call: uncached + written to the cache + read from it."""
    return (
        _tokens(usage, "input_tokens")
        + _tokens(usage, "cache_creation_input_tokens")
        + _tokens(usage, "cache_read_input_tokens")
    )


def ceiling_usd(
    model: str, input_tokens: int, output_tokens: int, *, on: date | None = None
) -> Decimal:
    """The most one call can cost: every prompt token at the dearer of the input and cache-write
    prices, and every allowed output token. Zero for the demo model or an unknown price."""
    if model == DEMO_MODEL_ID:
        return Decimal(0)
    info = model_family(model)
    if info is None:
        return Decimal(0)
    prices = info.prices_on(on)
    per_input = max(prices.input, prices.cache_write)
    return (max(0, input_tokens) * per_input + max(0, output_tokens) * prices.output) / MILLION
