"""Model call failures as errors a user can act on: what happened, and what to do about it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .model_catalog import KNOWN_MODELS, closest_model, get_model
from .stop_reasons import context_too_long_message

# Kinds a caller may retry (later, or at once); the others need a change of request or settings.
RETRYABLE_KINDS = frozenset(
    {
        "rate_limited",
        "overloaded",
        "server",
        "connection",
        "timeout",
        "stream_cut",
        "invalid_tool_json",
    }
)


class ModelError(Exception):
    """A model call failed; `message` tells an end user what happened and what to do."""

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        retryable: bool | None = None,
        partial_content: list[dict[str, Any]] | None = None,
        status_code: int | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.retryable = kind in RETRYABLE_KINDS if retryable is None else retryable
        self.partial_content = list(partial_content or [])
        self.status_code = status_code


_ERROR_TYPE_KINDS = {
    "rate_limit_error": "rate_limited",
    "overloaded_error": "overloaded",
    "api_error": "server",
    "timeout_error": "timeout",
    "authentication_error": "auth",
    "permission_error": "auth",
    "not_found_error": "not_found",
    "invalid_request_error": "bad_request",
    "request_too_large": "bad_request",
}


def _status_kind(status: int) -> str:
    if status == 429:
        return "rate_limited"
    if status == 529:
        return "overloaded"
    if status in (401, 403):
        return "auth"
    if status == 404:
        return "not_found"
    if status in (408, 504):
        return "timeout"
    if status >= 500:
        return "server"
    return "bad_request"


def status_error(
    *,
    error_type: str,
    status_code: int,
    detail: str,
    model: str,
    models: Sequence[str],
    partial_content: list[dict[str, Any]],
) -> ModelError:
    """The ModelError for an API error answer (HTTP status, or an SSE `error` event mid-stream)."""
    # A mid-stream SSE `error` event arrives with HTTP 200, so the body's error type decides first.
    kind = _ERROR_TYPE_KINDS.get(error_type) or _status_kind(status_code)
    status = status_code if status_code >= 400 else None
    shown = f"HTTP {status}" if status else "during the reply"
    if kind == "bad_request" and "prompt is too long" in detail.lower():
        return ModelError(
            "context_window",
            context_too_long_message(model, detail),
            partial_content=partial_content,
            status_code=status,
        )
    messages = {
        "rate_limited": f"The model API is rate-limiting requests ({shown}). Wait a minute and try again.",
        "overloaded": f"The model is overloaded ({shown}). Try again in a minute.",
        "server": f"The model API had an internal error ({shown}). Try again in a minute.",
        "timeout": f"The model API timed out ({shown}). Try again.",
        "auth": f"The model API refused the API key ({shown}): {detail}. Check ANTHROPIC_API_KEY.",
        "not_found": not_found_message(model, models, shown, detail),
        "bad_request": f"The model API rejected the request ({shown}): {detail}. "
        "This is likely a bug in Skillscope; please report it with this message.",
    }
    return ModelError(kind, messages[kind], partial_content=partial_content, status_code=status)


def not_found_message(model: str, models: Sequence[str], shown: str, detail: str) -> str:
    """A 404: which model id failed, which ids are configured, and what to change."""
    configured = list(models) or list(KNOWN_MODELS)
    if get_model(model) is None:
        close = closest_model(model, configured)
        hint = f' Did you mean "{close}"?' if close else ""
        lead = (
            f'The model API does not serve the model "{model}" ({shown}: {detail}); it is not '
            f"a model Skillscope knows either.{hint}"
        )
    else:
        lead = (
            f'The model API answered "not found" for the model "{model}" ({shown}: {detail}). '
            "Your account or endpoint may not offer it."
        )
    return (
        f"{lead} Models configured here (ANTHROPIC_MODELS): {', '.join(configured)}. Pick one of "
        "them for this conversation (or fix the skill's `model:` field); if the id is right, "
        "check ANTHROPIC_BASE_URL."
    )
