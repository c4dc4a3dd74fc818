"""The model client a run talks to, chosen by the MODEL_CLIENT setting (a dotted path)."""

from __future__ import annotations

import functools

from django.conf import settings
from django.utils.module_loading import import_string

from skills_app.core.demo import DemoModel
from skills_app.core.llm import AnthropicModel, ModelClient


def default_client() -> ModelClient:
    """The real model when an API key is set, else the offline demo model."""
    if settings.ANTHROPIC_API_KEY:
        return _anthropic_model(
            settings.ANTHROPIC_API_KEY,
            settings.ANTHROPIC_BASE_URL or None,
            settings.ANTHROPIC_MODEL,
            settings.ANTHROPIC_MAX_RETRIES,
            settings.ANTHROPIC_TIMEOUT,
            tuple(settings.ANTHROPIC_MODELS),
        )
    return DemoModel(delay=settings.DEMO_MODEL_DELAY)


@functools.lru_cache(maxsize=8)
def _anthropic_model(
    api_key: str,
    base_url: str | None,
    model: str,
    max_retries: int,
    timeout: float,
    models: tuple[str, ...],
) -> AnthropicModel:
    # One per configuration, shared by every run of the process: each keeps one SDK client (and
    # its connection pool) per event loop. A new SDK client costs tens of milliseconds of event
    # loop time (its TLS context), which fifty runs starting at once would take from the others.
    return AnthropicModel(
        api_key=api_key,
        base_url=base_url,
        model=model,
        max_retries=max_retries,
        timeout=timeout,
        models=models,
    )


def model_client() -> ModelClient:
    """A client built by the factory named in settings.MODEL_CLIENT."""
    factory = import_string(settings.MODEL_CLIENT)
    client: ModelClient = factory()
    return client
