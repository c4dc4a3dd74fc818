"""The budget's bound on a request's prompt tokens: UTF-8 bytes, media at base64 characters / 4."""

from __future__ import annotations

import base64

from hypothesis import given
from hypothesis import strategies as st

from skills_app.core.context_window import estimate_input_tokens
from skills_app.core.llm import ModelRequest
from skills_app.core.token_bound import TOOL_PROMPT_TOKENS, input_token_bound

MODEL = "claude-opus-4-8"


def request(
    messages: list[dict], *, system: str = "", tools: list[dict] | None = None
) -> ModelRequest:
    return ModelRequest(
        model=MODEL, system=system, tools=tools or [], messages=messages, max_tokens=1000
    )


def test_it_counts_every_utf8_byte_of_system_tools_and_messages():
    # '"ab"' is 4 bytes, '[]' 2, and '[{"role":"user","content":"é"}]' 32 (é is 2 bytes).
    sent = request([{"role": "user", "content": "é"}], system="ab")
    assert input_token_bound(sent) == 4 + 2 + 32


def test_fifteen_thousand_five_hundred_emoji_count_four_tokens_each():
    emoji = "\N{GRINNING FACE}" * 15_500
    sent = request([{"role": "user", "content": emoji}])
    # '[]' of the system as a string '""' (2) and tools (2), then the message's JSON around it.
    assert input_token_bound(sent) == 2 + 2 + len('[{"role":"user","content":""}]') + 62_000
    # What characters / 4 said: about a quarter of one token each, 13 times too few.
    assert estimate_input_tokens(sent) < 4_000


def test_offered_tools_add_the_apis_own_tool_prompt():
    tool = {"name": "Glob", "description": "find", "input_schema": {"type": "object"}}
    without = request([{"role": "user", "content": "hi"}])
    with_tool = request([{"role": "user", "content": "hi"}], tools=[tool])
    tool_bytes = len('[{"name":"Glob","description":"find","input_schema":{"type":"object"}}]')
    assert input_token_bound(with_tool) - input_token_bound(without) == (
        tool_bytes - 2 + TOOL_PROMPT_TOKENS
    )


def _image(data: str) -> dict:
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}


def test_image_data_counts_four_base64_characters_a_token_wherever_it_is():
    data = base64.b64encode(bytes(3000)).decode()  # 4,000 characters
    assert len(data) == 4000
    empty = request([{"role": "user", "content": [_image("")]}])
    direct = request([{"role": "user", "content": [_image(data)]}])
    assert input_token_bound(direct) - input_token_bound(empty) == 1000
    result = {"type": "tool_result", "tool_use_id": "t1", "content": [_image(data)]}
    empty_result = {"type": "tool_result", "tool_use_id": "t1", "content": [_image("")]}
    inside = request([{"role": "user", "content": [result]}])
    assert (
        input_token_bound(inside)
        - input_token_bound(request([{"role": "user", "content": [empty_result]}]))
        == 1000
    )


def test_a_pdf_document_counts_like_an_image_and_a_text_document_by_its_bytes():
    pdf = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": "A" * 400},
    }
    text = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "\N{PARTY POPPER}" * 100},
    }
    blank_pdf = {**pdf, "source": {**pdf["source"], "data": ""}}
    blank_text = {**text, "source": {**text["source"], "data": ""}}
    assert (
        input_token_bound(request([{"role": "user", "content": [pdf]}]))
        - input_token_bound(request([{"role": "user", "content": [blank_pdf]}]))
        == 100
    )
    assert (
        input_token_bound(request([{"role": "user", "content": [text]}]))
        - input_token_bound(request([{"role": "user", "content": [blank_text]}]))
        == 400
    )


@given(st.text())
def test_no_tokenization_of_a_text_can_exceed_the_bound(text):
    # Every token stands for at least one byte of the text it encodes.
    assert input_token_bound(request([{"role": "user", "content": text}])) >= len(text.encode())
