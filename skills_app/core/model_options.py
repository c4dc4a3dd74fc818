"""Per-request model settings (thinking, effort, sampling, max_tokens) as the chosen model accepts them.

A setting the model would reject is never sent: budget_tokens and temperature on the newest
models, effort on Haiku, an explicit "disabled" on a model that always thinks. An effort level
the model lacks becomes the nearest lower level it has. An unknown model (a custom endpoint)
gets none of these settings, only what every Messages API accepts.
"""

from __future__ import annotations

from typing import Any

from .model_catalog import ModelInfo, clamp_effort

# The summary of the model's reasoning, not the default "omitted" (empty text): the UI shows it.
ADAPTIVE_THINKING: dict[str, str] = {"type": "adaptive", "display": "summarized"}
DISABLED_THINKING: dict[str, str] = {"type": "disabled"}
MIN_BUDGET_TOKENS = 1024


def request_options(
    info: ModelInfo | None,
    *,
    max_tokens: int,
    thinking: bool | None = None,
    effort: str | None = None,
    temperature: float | None = None,
) -> dict[str, Any]:
    """The request fields for these settings: max_tokens, and thinking/output_config/temperature.

    thinking: True turns thinking on (adaptive with a summary where the model has it, else a
    budget of half of max_tokens), False turns it off where the model allows, None leaves the
    model's default. effort: one of EFFORT_LEVELS or None (the model's default, "high").
    """
    if info is None:
        return {"max_tokens": max_tokens}
    max_tokens = min(max_tokens, info.max_output)
    options: dict[str, Any] = {"max_tokens": max_tokens}
    config = _thinking_config(info, thinking, max_tokens)
    if config is not None:
        options["thinking"] = config
    if effort:
        level = clamp_effort(info, effort)
        if level is not None:
            options["output_config"] = {"effort": level}
    if temperature is not None and info.sampling:
        # With thinking on, the API accepts only temperature 1.
        thinks = thinks_with(info, thinking)
        if not thinks or temperature == 1:
            options["temperature"] = temperature
    return options


def thinks_with(info: ModelInfo, thinking: bool | None) -> bool:
    """Whether a request with this setting runs with thinking on this model."""
    if thinking is None:
        return info.thinks_by_default
    if thinking:
        return info.adaptive_thinking or info.budget_thinking
    return not info.can_disable_thinking


def _thinking_config(
    info: ModelInfo, thinking: bool | None, max_tokens: int
) -> dict[str, Any] | None:
    if thinking is None:
        return None
    if thinking:
        if info.adaptive_thinking:
            return dict(ADAPTIVE_THINKING)
        # The budget must be at least 1024 and below max_tokens; too small a max_tokens: no thinking.
        if info.budget_thinking and max_tokens > MIN_BUDGET_TOKENS:
            return {"type": "enabled", "budget_tokens": max(MIN_BUDGET_TOKENS, max_tokens // 2)}
        return None
    if info.thinks_by_default and info.can_disable_thinking:
        return dict(DISABLED_THINKING)
    # Off already when omitted, or a model that always thinks (an explicit "disabled" is a 400).
    return None
