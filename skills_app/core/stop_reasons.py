"""What the user is told when a turn ends other than normally, and what happens to that turn.

One place for the texts, so the loop, the UI and the tests say the same thing. `stop_notice`
maps a `stop_reason` of a finished model call to a `StopNotice`; the loop stores its text as a
notice row (`to_model=False`) and, when `exclude_turn` is set, marks the turn's rows excluded
(see `transcript.exclude_turn`) so it is not sent again with later messages.
"""

from __future__ import annotations

from dataclasses import dataclass

from .model_catalog import get_model


@dataclass(frozen=True, slots=True)
class StopNotice:
    """A notice for the user about how a turn ended."""

    code: str  # the stop reason, or "empty"
    text: str
    # Leave the turn out of later requests (the user can Retry it).
    exclude_turn: bool = False
    # Offer a Retry button for this turn.
    retry: bool = False
    # Offer to start a new conversation carrying a summary of this one.
    offer_new_conversation: bool = False


REFUSAL_TEXT = (
    "The model declined to answer this message. It will not be sent again with your next "
    "messages: rephrase it, or press Retry to send it unchanged."
)
FAILED_TURN_TEXT = (
    "This message got no complete answer, so it will not be sent with your next messages. "
    "Press Retry to send it again."
)
MAX_TOKENS_TEXT = (
    "The answer was cut off at the output limit of {max_tokens} tokens. Ask to continue, or raise "
    "ANTHROPIC_MAX_TOKENS (this model allows up to {model_max} tokens)."
)
CONTEXT_WINDOW_TEXT = (
    "The conversation has filled the model's context window ({window} tokens), so the answer "
    "stopped. Start a new conversation that carries a summary of this one to go on."
)
PAUSE_TURN_TEXT = (
    "The model paused a long-running turn and it was not resumed. Send a message to continue."
)
EMPTY_TEXT = "The model returned an empty response."
CONTEXT_NEAR_TEXT = (
    "This conversation is about {tokens} tokens long, {percent}% of the {window}-token context "
    "window of {label}. Consider starting a new conversation that carries a summary of this one."
)
CONTEXT_OVER_TEXT = (
    "The next request would be about {tokens} tokens, more than the {window}-token context window "
    "of {label}; it was not sent. Start a new conversation that carries a summary of this one."
)
CONTEXT_REJECTED_TEXT = (
    "The model API refused the request because the conversation is longer than the context "
    "window of {label} ({detail}). Start a new conversation that carries a summary of this one."
)


def _label(model: str) -> str:
    info = get_model(model)
    return info.label if info else model


def stop_notice(
    stop_reason: str | None, *, model: str, max_tokens: int, has_content: bool
) -> StopNotice | None:
    """The notice for a finished call's stop reason; None when the turn ended normally."""
    info = get_model(model)
    if stop_reason == "refusal":
        return StopNotice("refusal", REFUSAL_TEXT, exclude_turn=True, retry=True)
    if stop_reason == "max_tokens":
        model_max = info.max_output if info else max_tokens
        text = MAX_TOKENS_TEXT.format(max_tokens=f"{max_tokens:,}", model_max=f"{model_max:,}")
        return StopNotice("max_tokens", text)
    if stop_reason == "model_context_window_exceeded":
        window = f"{info.context_window:,}" if info else "its"
        return StopNotice(
            "model_context_window_exceeded",
            CONTEXT_WINDOW_TEXT.format(window=window),
            offer_new_conversation=True,
        )
    if stop_reason == "pause_turn":
        # The loop resumes a paused turn itself; this is for when it stops resuming (turn limit).
        return StopNotice("pause_turn", PAUSE_TURN_TEXT)
    if not has_content:
        return StopNotice("empty", EMPTY_TEXT, retry=True)
    return None


def failed_turn_notice(error_message: str) -> StopNotice:
    """The notice after a model call failed (ModelError): the error, then what happens to the turn."""
    return StopNotice(
        "failed", f"{error_message}\n\n{FAILED_TURN_TEXT}", exclude_turn=True, retry=True
    )


def context_too_long_message(model: str, detail: str) -> str:
    """The API said "prompt is too long": which model, its window, and what to do."""
    return CONTEXT_REJECTED_TEXT.format(label=_label(model), detail=detail)
