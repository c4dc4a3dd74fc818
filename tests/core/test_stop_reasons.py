"""How a turn ended, in words a user can act on, and the context-window estimate before sending."""

from __future__ import annotations

from skills_app.core.context_window import (
    PreviousCall,
    check_context,
    estimate_input_tokens,
    prefix_chars,
)
from skills_app.core.llm import ModelRequest
from skills_app.core.stop_reasons import REFUSAL_TEXT, failed_turn_notice, stop_notice


def notice(stop_reason: str | None, *, has_content: bool = True, model: str = "claude-opus-4-8"):
    return stop_notice(stop_reason, model=model, max_tokens=8192, has_content=has_content)


def test_a_refusal_is_declined_left_out_and_retryable() -> None:
    refused = notice("refusal", has_content=False)
    assert refused is not None
    assert (refused.code, refused.text) == ("refusal", REFUSAL_TEXT)
    assert refused.exclude_turn and refused.retry
    assert "will not be sent again" in refused.text


def test_limits_say_which_limit_with_the_figures() -> None:
    cut = notice("max_tokens")
    assert cut is not None and not cut.exclude_turn
    assert cut.text == (
        "The answer was cut off at the output limit of 8,192 tokens. Ask to continue, or raise "
        "ANTHROPIC_MAX_TOKENS (this model allows up to 128,000 tokens)."
    )
    full = notice("model_context_window_exceeded", model="claude-haiku-4-5")
    assert full is not None and full.offer_new_conversation
    assert "context window (200,000 tokens)" in full.text
    paused = notice("pause_turn")
    assert paused is not None and "paused a long-running turn" in paused.text


def test_a_normal_end_says_nothing_and_an_empty_one_says_so() -> None:
    assert notice("end_turn") is None
    assert notice("tool_use") is None
    empty = notice("end_turn", has_content=False)
    assert empty is not None and empty.code == "empty" and empty.retry


def test_a_failed_turn_keeps_the_error_and_says_what_happens_to_the_message() -> None:
    failed = failed_turn_notice("The model is overloaded (HTTP 529). Try again in a minute.")
    assert failed.exclude_turn and failed.retry
    assert failed.text.startswith("The model is overloaded (HTTP 529).")
    assert "will not be sent with your next messages. Press Retry" in failed.text


def request(model: str, text: str, *, system: str = "Be brief.") -> ModelRequest:
    messages = [{"role": "user", "content": [{"type": "text", "text": text}]}]
    return ModelRequest(model=model, system=system, tools=[], messages=messages, max_tokens=100)


def test_a_short_request_fits() -> None:
    estimate = check_context(request("claude-opus-4-8", "hello"))
    assert (estimate.level, estimate.message, estimate.window) == ("ok", "", 1_000_000)
    assert 0 < estimate.tokens < 50


def test_near_and_over_the_window_are_said_with_the_figures() -> None:
    near = check_context(request("claude-haiku-4-5", "w" * 720_000))  # ~180,000 tokens
    assert near.level == "near"
    assert near.message.startswith("This conversation is about 180,0")
    assert "90% of the 200,000-token context window of Claude Haiku 4.5" in near.message
    over = check_context(request("claude-haiku-4-5", "w" * 900_000))
    assert over.level == "over"
    assert "more than the 200,000-token context window of Claude Haiku 4.5" in over.message
    assert "it was not sent" in over.message


def test_the_previous_calls_usage_makes_the_estimate_exact_for_what_it_saw() -> None:
    first = request("claude-opus-4-8", "hello")
    later = ModelRequest(
        model=first.model,
        system=first.system,
        tools=[],
        messages=[
            *first.messages,
            {"role": "assistant", "content": [{"type": "text", "text": "x" * 400}]},
            {"role": "user", "content": [{"type": "text", "text": "y" * 400}]},
        ],
        max_tokens=100,
    )
    usage = {"input_tokens": 10, "cache_read_input_tokens": 150_000}
    previous = PreviousCall(usage=usage, message_count=1, prefix_chars=prefix_chars(first))
    estimate = estimate_input_tokens(later, previous)
    assert 150_010 + 200 <= estimate <= 150_010 + 240  # the known 150,010 + ~800 chars / 4
    # Once the system prompt changed (a skill loaded into it), the usage no longer applies.
    changed = ModelRequest(later.model, "Other.", [], later.messages, 100)
    assert estimate_input_tokens(changed, previous) < 1_000


def test_a_model_without_figures_is_never_blocked() -> None:
    estimate = check_context(request("claude-unknown", "w" * 10_000_000))
    assert (estimate.level, estimate.window) == ("ok", None)
