"""Fixtures of the chat tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def fake_model(settings, fake_anthropic):
    """The fake Anthropic server without retries, and no rate limit in the way of a test's messages."""
    from tests.support.loop_helpers import use_fake_model

    use_fake_model(settings, fake_anthropic, retries=0)
    settings.RATE_LIMIT_MESSAGES_PER_MINUTE = 1000
    return fake_anthropic
