"""What a model call cost: exact Decimal figures from the usage the API reports."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from skills_app.core.pricing import (
    cost_usd,
    format_usd,
    input_total,
)

USAGE = {
    "input_tokens": 1_000,
    "output_tokens": 500,
    "cache_creation_input_tokens": 2_000,
    "cache_read_input_tokens": 10_000,
}


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        # 1,000 x $5 + 500 x $25 + 2,000 x $6.25 + 10,000 x $0.50, per million
        ("claude-opus-4-8", Decimal("0.035")),
        ("claude-opus-4-7", Decimal("0.035")),
        # 1,000 x $10 + 500 x $50 + 2,000 x $12.50 + 10,000 x $1
        ("claude-fable-5", Decimal("0.07")),
        # 1,000 x $1 + 500 x $5 + 2,000 x $1.25 + 10,000 x $0.10
        ("claude-haiku-4-5", Decimal("0.007")),
        ("claude-haiku-4-5-20251001", Decimal("0.007")),
        # 1,000 x $3 + 500 x $15 + 2,000 x $3.75 + 10,000 x $0.30
        ("claude-sonnet-4-6", Decimal("0.021")),
        ("claude-sonnet-5", Decimal("0.021")),
        # A dated snapshot the table does not list is priced as its family.
        ("claude-opus-4-8-20260601", Decimal("0.035")),
    ],
)
def test_the_cost_of_a_call_is_exact(model: str, expected: Decimal) -> None:
    assert cost_usd(model, USAGE) == expected


def test_introductory_prices_apply_until_their_last_day() -> None:
    # Sonnet 5 at $2 / $10 through 2026-08-31: 1,000 x 2 + 500 x 10 + 2,000 x 2.5 + 10,000 x 0.2
    assert cost_usd("claude-sonnet-5", USAGE, on=date(2026, 8, 31)) == Decimal("0.014")
    assert cost_usd("claude-sonnet-5", USAGE, on=date(2026, 9, 1)) == Decimal("0.021")


def test_one_hour_cache_writes_cost_twice_the_input_price() -> None:
    usage = {
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_creation_input_tokens": 1_000,
        "cache_creation": {"ephemeral_5m_input_tokens": 600, "ephemeral_1h_input_tokens": 400},
    }
    # 600 x $6.25 + 400 x $10, per million
    assert cost_usd("claude-opus-4-8", usage) == Decimal("0.00775")


def test_the_demo_model_and_unknown_models_have_no_cost() -> None:
    assert cost_usd("demo", USAGE) is None
    assert cost_usd("claude-sonnet-5-5", USAGE) is None
    assert format_usd(None, model="demo") == "no cost"
    assert format_usd(None) == "no cost"
    assert format_usd(None, model="claude-sonnet-5-5") == "price unknown (claude-sonnet-5-5)"


def test_missing_fields_count_as_zero_and_bad_ones_are_refused() -> None:
    assert cost_usd("claude-opus-4-8", {"output_tokens": 40_000}) == Decimal("1")
    assert cost_usd("claude-opus-4-8", {}) == Decimal("0")
    with pytest.raises(ValueError, match="usage\\['input_tokens'\\] must be a whole number"):
        cost_usd("claude-opus-4-8", {"input_tokens": -1})
    with pytest.raises(ValueError, match="not '12'"):
        cost_usd("claude-opus-4-8", {"output_tokens": "12"})


def test_costs_are_shown_to_a_hundredth_of_a_cent() -> None:
    assert format_usd(Decimal("0.035")) == "$0.0350"
    assert format_usd(Decimal("1.23456")) == "$1.2346"
    assert format_usd(Decimal("0")) == "$0.0000"
    assert format_usd(Decimal("0.00003")) == "$0.000030"


def test_the_prompt_total_counts_cached_and_uncached_tokens() -> None:
    assert input_total(USAGE) == 13_000
    assert input_total({}) == 0
