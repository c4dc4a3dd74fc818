"""The assistant bubble, rendered on the server: the model's thinking as a collapsed section before
the text, and the answer's tokens and cost behind a hover/focus detail."""

from __future__ import annotations

import pytest

from skills_app.chat.rendering import render_message
from skills_app.models import Conversation, Message, Run

pytestmark = pytest.mark.django_db

USAGE = {
    "input_tokens": 1200,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 10_000,
    "output_tokens": 300,
}


def answer(alice, content, **meta) -> Message:
    conversation = Conversation.objects.create(owner=alice)
    run = Run.objects.create(conversation=conversation, status=Run.DONE, model="claude-opus-4-8")
    return Message.objects.create(
        conversation=conversation, run=run, seq=1, role="assistant", content=content, meta=meta
    )


def test_thinking_is_a_collapsed_section_before_the_text(alice):
    row = answer(
        alice,
        [
            {"type": "thinking", "thinking": "First I **count**.", "signature": "sig_1"},
            {"type": "text", "text": "There are three."},
        ],
    )
    html = render_message(row, can_inspect=False)
    assert '<details class="thinking"><summary>Thinking</summary>' in html
    assert '<details class="thinking" open' not in html
    assert html.index("First I <strong>count</strong>.") < html.index("There are three.")
    assert "sig_1" not in html  # the signature is for the API, not for people


def test_thinking_markup_is_escaped_like_any_model_output(alice):
    row = answer(
        alice,
        [
            {
                "type": "thinking",
                "thinking": "<script>alert(1)</script><img src=x onerror=y>",
                "signature": "s",
            },
            {"type": "text", "text": "ok"},
        ],
    )
    html = render_message(row, can_inspect=False)
    assert "<script>" not in html and "onerror" not in html.replace("onerror=y&gt;", "")


def test_omitted_and_redacted_thinking(alice):
    omitted = answer(
        alice,
        [{"type": "thinking", "thinking": "", "signature": "s"}, {"type": "text", "text": "ok"}],
    )
    assert 'class="thinking"' not in render_message(omitted, can_inspect=False)
    redacted = answer(
        alice, [{"type": "redacted_thinking", "data": "ENCRYPTED"}, {"type": "text", "text": "ok"}]
    )
    html = render_message(redacted, can_inspect=False)
    assert 'class="thinking"' in html and "encrypted by the API" in html and "ENCRYPTED" not in html


def test_the_answer_shows_its_tokens_and_cost(alice):
    row = answer(
        alice,
        [{"type": "text", "text": "Hi"}],
        usage=USAGE,
        model="claude-opus-4-8",
        stop_reason="end_turn",
    )
    html = render_message(row, can_inspect=False)
    # 1,200 x $5 + 10,000 x $0.50 + 300 x $25 per million = $0.0185
    assert '<span class="usage-summary">$0.0185</span>' in html
    assert (
        "Claude Opus 4.8 · 11,200 input tokens (10,000 read from the cache, 0 written to it)"
        in html
    )
    assert "300 output tokens" in html


def test_an_unknown_model_says_its_price_is_unknown(alice):
    row = answer(alice, [{"type": "text", "text": "Hi"}], usage=USAGE, model="my-proxy-model")
    html = render_message(row, can_inspect=False)
    assert "price unknown (my-proxy-model)" in html
