"""The model table, the start-up check that refuses unknown ids, and what the settings default to."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.checks import run_checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from skills_app.core.model_catalog import (
    DEFAULT_MODEL,
    DEFAULT_OFFERED_MODELS,
    KNOWN_MODELS,
    UnknownModelError,
    choose_model,
    get_model,
    resolve_model_id,
)


def test_the_default_and_offered_models_are_known() -> None:
    assert DEFAULT_MODEL == "claude-opus-4-8"
    assert DEFAULT_MODEL in DEFAULT_OFFERED_MODELS
    assert all(m in KNOWN_MODELS for m in DEFAULT_OFFERED_MODELS)


def test_the_table_holds_the_published_figures() -> None:
    opus = KNOWN_MODELS["claude-opus-4-8"]
    assert (opus.context_window, opus.max_output) == (1_000_000, 128_000)
    prices = opus.prices
    assert (prices.input, prices.output, prices.cache_write, prices.cache_read) == (
        Decimal("5.00"),
        Decimal("25.00"),
        Decimal("6.25"),
        Decimal("0.50"),
    )
    haiku = KNOWN_MODELS["claude-haiku-4-5"]
    assert (haiku.context_window, haiku.max_output, haiku.prices.input) == (
        200_000,
        64_000,
        Decimal("1.00"),
    )
    assert KNOWN_MODELS["claude-fable-5"].prices.cache_read == Decimal("1.00")
    assert KNOWN_MODELS["claude-fable-5"].can_disable_thinking is False
    assert KNOWN_MODELS["claude-sonnet-5"].thinks_by_default is True
    assert KNOWN_MODELS["claude-opus-4-8"].sampling is False
    assert "xhigh" not in KNOWN_MODELS["claude-sonnet-4-6"].efforts


def test_models_are_found_by_id_or_dated_id_and_aliases_resolve() -> None:
    assert get_model("claude-haiku-4-5-20251001") is KNOWN_MODELS["claude-haiku-4-5"]
    assert get_model("claude-opus-4-8-20990101") is None  # a dated id the API never named
    assert get_model("demo") is None
    assert resolve_model_id("opus") == "claude-opus-4-8"
    assert resolve_model_id(" Sonnet ") == "claude-sonnet-5"
    assert resolve_model_id("inherit") is None and resolve_model_id("") is None
    assert resolve_model_id("claude-sonnet-4-6") == "claude-sonnet-4-6"


def test_an_unknown_id_says_what_to_use_instead() -> None:
    with pytest.raises(UnknownModelError) as caught:
        raise UnknownModelError("claude-sonet-5")
    message = str(caught.value)
    assert message.startswith('"claude-sonet-5" is not a model Skillscope knows.')
    assert 'Did you mean "claude-sonnet-5"?' in message
    assert "Valid ids: claude-opus-4-8, claude-sonnet-5, claude-haiku-4-5" in message


def test_the_check_passes_for_the_defaults() -> None:
    assert run_checks(tags=["models"]) == []


def test_the_check_refuses_an_unknown_default_model_with_the_valid_ids(settings) -> None:
    settings.ANTHROPIC_MODEL = "claude-sonnet-5-5"
    settings.ANTHROPIC_MODELS = ["claude-sonnet-5-5", "claude-opus-4-8"]
    [error] = run_checks(tags=["models"])
    assert error.id == "skillscope.E001"
    assert error.msg == (
        'ANTHROPIC_MODEL names "claude-sonnet-5-5", which is not a model Skillscope knows. '
        'Did you mean "claude-sonnet-5"?'
    )
    assert error.hint.startswith("Valid ids: claude-opus-4-8, claude-sonnet-5, claude-haiku-4-5,")
    with pytest.raises(SystemCheckError, match="skillscope.E001"):
        call_command("check")


def test_the_check_refuses_each_unknown_offered_model_and_a_bad_effort(settings) -> None:
    settings.ANTHROPIC_MODELS = ["claude-opus-4-8", "gpt-5", "claude-haiku-45"]
    settings.ANTHROPIC_EFFORT = "extreme"
    errors = run_checks(tags=["models"])
    assert [e.id for e in errors] == ["skillscope.E002", "skillscope.E002", "skillscope.E003"]
    assert '"gpt-5"' in errors[0].msg and "Did you mean" not in errors[0].msg
    assert 'Did you mean "claude-haiku-4-5"?' in errors[1].msg
    assert "Use one of low, medium, high, xhigh, max" in errors[2].hint


def test_a_picked_model_must_be_one_of_the_offered_ones() -> None:
    offered = ["claude-opus-4-8", "claude-sonnet-5"]
    assert choose_model("claude-sonnet-5", offered) == "claude-sonnet-5"
    with pytest.raises(UnknownModelError) as known:
        choose_model("claude-fable-5", offered)
    assert str(known.value) == (
        '"claude-fable-5" is a known model but not offered here; add it to ANTHROPIC_MODELS. '
        "Offered models: claude-opus-4-8, claude-sonnet-5."
    )
    with pytest.raises(UnknownModelError, match='Did you mean "claude-opus-4-8"'):
        choose_model("claude-opus-4.8", offered)
