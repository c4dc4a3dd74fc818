"""Per-model request settings: a setting the model rejects is never sent."""

from __future__ import annotations

import itertools

import pytest

from skills_app.core.model_catalog import EFFORT_LEVELS, KNOWN_MODELS, clamp_effort, get_model
from skills_app.core.model_options import request_options, thinks_with
from tests.support.fake_anthropic_rules import validate_settings

SUMMARIZED = {"type": "adaptive", "display": "summarized"}


def options(model: str, **settings: object) -> dict[str, object]:
    settings.setdefault("max_tokens", 8192)
    return request_options(get_model(model), **settings)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("model", "given", "expected"),
    [
        (
            "claude-opus-4-8",
            {"thinking": True, "effort": "xhigh"},
            {"max_tokens": 8192, "thinking": SUMMARIZED, "output_config": {"effort": "xhigh"}},
        ),
        ("claude-opus-4-8", {"thinking": False}, {"max_tokens": 8192}),
        ("claude-opus-4-8", {"thinking": None}, {"max_tokens": 8192}),
        (
            "claude-sonnet-5",
            {"thinking": False},
            {"max_tokens": 8192, "thinking": {"type": "disabled"}},
        ),
        ("claude-sonnet-5", {"thinking": True}, {"max_tokens": 8192, "thinking": SUMMARIZED}),
        ("claude-fable-5", {"thinking": False}, {"max_tokens": 8192}),
        ("claude-fable-5", {"thinking": True}, {"max_tokens": 8192, "thinking": SUMMARIZED}),
        (
            "claude-haiku-4-5",
            {"thinking": True, "effort": "high"},
            {"max_tokens": 8192, "thinking": {"type": "enabled", "budget_tokens": 4096}},
        ),
        ("claude-haiku-4-5", {"thinking": True, "max_tokens": 1024}, {"max_tokens": 1024}),
        (
            "claude-haiku-4-5",
            {"thinking": True, "max_tokens": 1500},
            {"max_tokens": 1500, "thinking": {"type": "enabled", "budget_tokens": 1024}},
        ),
        (
            "claude-opus-4-6",
            {"effort": "xhigh"},
            {"max_tokens": 8192, "output_config": {"effort": "high"}},
        ),
        ("claude-opus-4-8", {"temperature": 0.2}, {"max_tokens": 8192}),
        ("claude-haiku-4-5", {"temperature": 0.2}, {"max_tokens": 8192, "temperature": 0.2}),
        (
            "claude-sonnet-4-6",
            {"temperature": 0.2, "thinking": True},
            {"max_tokens": 8192, "thinking": SUMMARIZED},
        ),
        (
            "claude-sonnet-4-6",
            {"temperature": 1.0, "thinking": True},
            {"max_tokens": 8192, "thinking": SUMMARIZED, "temperature": 1.0},
        ),
        ("claude-haiku-4-5", {"max_tokens": 100_000}, {"max_tokens": 64_000}),
    ],
)
def test_settings_become_the_fields_the_model_accepts(
    model: str, given: dict[str, object], expected: dict[str, object]
) -> None:
    assert options(model, **given) == expected


def test_an_unknown_model_gets_only_max_tokens() -> None:
    assert request_options(
        None, max_tokens=999_999, thinking=True, effort="max", temperature=0.1
    ) == {"max_tokens": 999_999}


@pytest.mark.parametrize("model", sorted(KNOWN_MODELS))
def test_no_combination_of_settings_is_rejected_by_the_api_rules(model: str) -> None:
    info = KNOWN_MODELS[model]
    combos = itertools.product(
        (None, True, False),
        (None, *EFFORT_LEVELS),
        (None, 0.0, 0.5, 1.0),
        (512, 1500, 8192, 200_000),
    )
    for thinking, effort, temperature, max_tokens in combos:
        fields = request_options(
            info, max_tokens=max_tokens, thinking=thinking, effort=effort, temperature=temperature
        )
        body = {"model": model, "messages": [{"role": "user", "content": "x"}], **fields}
        reason = validate_settings(body, info)
        assert reason is None, (thinking, effort, temperature, max_tokens, reason)


def test_effort_clamps_down_to_a_level_the_model_has() -> None:
    opus46, haiku = KNOWN_MODELS["claude-opus-4-6"], KNOWN_MODELS["claude-haiku-4-5"]
    assert clamp_effort(opus46, "xhigh") == "high"
    assert clamp_effort(opus46, "max") == "max"
    assert clamp_effort(opus46, "low") == "low"
    assert clamp_effort(haiku, "high") is None
    with pytest.raises(ValueError, match='Unknown effort "extreme": use one of low, medium'):
        clamp_effort(opus46, "extreme")


def test_whether_a_request_thinks() -> None:
    assert thinks_with(KNOWN_MODELS["claude-sonnet-5"], None) is True
    assert thinks_with(KNOWN_MODELS["claude-opus-4-8"], None) is False
    assert thinks_with(KNOWN_MODELS["claude-fable-5"], False) is True
    assert thinks_with(KNOWN_MODELS["claude-haiku-4-5"], True) is True
