from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from skills_app.core.redact import MIN_SPAN, HiddenIndex, HiddenText, normalise, redact

BODY = (
    "# Quarterly report\n\n"
    "Always open the ledger with scripts/open_ledger.py before anything else.\n"
    "Never show the customer list; summarise it as counts per region instead.\n"
    "CANARY-7f3a9c: the secret handshake is three short knocks and a cough.\n"
)


def test_it_replaces_a_quoted_line_with_a_placeholder_saying_what_and_how_much() -> None:
    line = "Never show the customer list; summarise it as counts per region instead."
    out = redact(f"The tool said: {line} Done.", [HiddenText(BODY, "hidden skill text")])
    assert out == f"The tool said: [hidden skill text withheld: {len(line):,} characters] Done."


def test_it_leaves_short_shared_strings_alone() -> None:
    text = "Open scripts/open_ledger.py and count per region."
    assert redact(text, [BODY]) == text


def test_it_finds_a_read_result_whose_short_lines_carry_line_numbers() -> None:
    short = "a: one\nb: two\nc: three\nd: four\ne: five\nf: six\ng: seven\n"
    numbered = "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(short.splitlines(), 1))
    index = HiddenIndex([short])
    assert index.contains_hidden(numbered)
    assert "three" not in index.redact(numbered)


def test_it_finds_grep_content_lines_and_crlf_copies() -> None:
    index = HiddenIndex([BODY])
    grep = "\n".join(
        f"skills/report/SKILL.md:{n}:{line}" for n, line in enumerate(BODY.splitlines(), 1)
    )
    assert "CANARY" not in index.redact(grep)
    crlf = BODY.replace("\n", "\r\n").replace(" ", "  ")
    assert "CANARY" not in index.redact(crlf)


def test_it_marks_an_answer_that_quotes_hidden_text_and_not_one_that_does_not() -> None:
    index = HiddenIndex([BODY])
    assert index.contains_hidden("As instructed: " + BODY[40:120])
    assert not index.contains_hidden("The report is ready; three regions were counted.")


def test_texts_too_short_to_withhold_are_ignored() -> None:
    index = HiddenIndex(["short hidden text"])
    assert not index
    assert index.redact("short hidden text") == "short hidden text"


def test_it_is_linear_in_the_outgoing_text() -> None:
    index = HiddenIndex([BODY * 50])
    noise = "lorem ipsum dolor sit amet " * 40_000  # about 1 MB, no hidden span
    started = time.monotonic()
    assert index.redact(noise) == noise
    assert time.monotonic() - started < 3.0
    mixed = (noise[:300_000] + BODY) * 3
    started = time.monotonic()
    assert "CANARY" not in index.redact(mixed)
    assert time.monotonic() - started < 3.0


def test_normalise_maps_back_to_the_original_characters() -> None:
    text = "a \r\n\tb     12\tc"
    norm, origin = normalise(text)
    assert norm == "a b 12 c"
    assert [text[i] for i in origin] == ["a", " ", "b", " ", "1", "2", "\t", "c"]


# --- properties ---------------------------------------------------------------------------

words = st.text(alphabet="abcdefghij \n\t", min_size=0, max_size=300)
hidden_texts = st.text(alphabet="klmnopqrstuvwxyz .,\n", min_size=MIN_SPAN, max_size=600)


@settings(max_examples=300, deadline=None)
@given(hidden=hidden_texts, before=words, after=words, data=st.data())
def test_a_hidden_span_embedded_anywhere_is_always_removed(hidden, before, after, data) -> None:
    norm = normalise(hidden)[0]
    if len(norm) < MIN_SPAN:
        return
    # Take a span of at least MIN_SPAN normalised characters from the hidden text.
    start = data.draw(st.integers(0, len(norm) - MIN_SPAN))
    end = data.draw(st.integers(start + MIN_SPAN, len(norm)))
    span = norm[start:end]
    out = HiddenIndex([hidden]).redact(before + span + after)
    out_norm = normalise(out)[0]
    for i in range(0, len(span) - MIN_SPAN + 1):
        assert span[i : i + MIN_SPAN] not in out_norm


@settings(max_examples=300, deadline=None)
@given(hidden=st.lists(hidden_texts, max_size=3), text=words)
def test_text_without_a_hidden_span_is_returned_unchanged(hidden, text) -> None:
    # Different alphabets (bar whitespace): no span of MIN_SPAN characters can be shared.
    assert HiddenIndex(hidden).redact(text) == text
