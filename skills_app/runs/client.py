"""The model client a run talks to, chosen by the MODEL_CLIENT setting (a dotted path)."""

from __future__ import annotations

from django.conf import settings
from django.utils.module_loading import import_string

from skills_app.core.demo import DemoModel
from skills_app.core.llm import AnthropicModel, ModelClient


def default_client() -> ModelClient:
    """The real model when an API key is set, else the offline demo model."""
    if settings.ANTHROPIC_API_KEY:
        return AnthropicModel(
            api_key=settings.ANTHROPIC_API_KEY,
            base_url=settings.ANTHROPIC_BASE_URL or None,
            model=settings.ANTHROPIC_MODEL,
            max_retries=settings.ANTHROPIC_MAX_RETRIES,
            timeout=settings.ANTHROPIC_TIMEOUT,
            models=settings.ANTHROPIC_MODELS,
        )
    return DemoModel(delay=settings.DEMO_MODEL_DELAY)


def instant_demo_client() -> ModelClient:
    """The demo model without pauses between chunks (the comparison page, tests)."""
    return DemoModel(delay=0)


def model_client() -> ModelClient:
    """A client built by the factory named in settings.MODEL_CLIENT."""
    factory = import_string(settings.MODEL_CLIENT)
    client: ModelClient = factory()
    return client
