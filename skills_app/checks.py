"""System checks (`manage.py check`, run by runserver and migrate): refuse a model id the API
would answer with 404, before a user's first message fails."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, Warning, register

from .core.model_catalog import EFFORT_LEVELS, KNOWN_MODELS, closest_model, get_model
from .core.tools.sandbox import describe_sandbox

VALID_IDS = ", ".join(KNOWN_MODELS)


def _unknown(setting: str, model_id: str, check_id: str) -> Error:
    close = closest_model(model_id)
    guess = f' Did you mean "{close}"?' if close else ""
    return Error(
        f'{setting} names "{model_id}", which is not a model Skillscope knows.{guess}',
        hint=f"Valid ids: {VALID_IDS}. Fix {setting} in the environment (see .env.example).",
        id=check_id,
    )


@register("models")
def check_models(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """ANTHROPIC_MODEL and every id of ANTHROPIC_MODELS are known; ANTHROPIC_EFFORT is a level."""
    errors: list[Error] = []
    default = settings.ANTHROPIC_MODEL
    if get_model(default) is None:
        errors.append(_unknown("ANTHROPIC_MODEL", default, "skillscope.E001"))
    for model_id in settings.ANTHROPIC_MODELS:
        if get_model(model_id) is None and model_id != default:
            errors.append(_unknown("ANTHROPIC_MODELS", model_id, "skillscope.E002"))
    effort = settings.ANTHROPIC_EFFORT
    if effort and effort not in EFFORT_LEVELS:
        errors.append(
            Error(
                f'ANTHROPIC_EFFORT="{effort}" is not an effort level.',
                hint=f"Use one of {', '.join(EFFORT_LEVELS)}, or leave it empty for the "
                "model's default.",
                id="skillscope.E003",
            )
        )
    return errors


@register("security")
def check_sandbox(app_configs: Any = None, **kwargs: Any) -> list[Warning]:
    """Say at start-up when commands would run without a sandbox (docs/security.md)."""
    status = describe_sandbox(settings.SANDBOX)
    if status.sandboxed:
        return []
    return [Warning(status.summary(), id="skillscope.W001")]
