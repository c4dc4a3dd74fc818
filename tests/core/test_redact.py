from __future__ import annotations

import re
import time

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from skills_app.core.redact import (
    MIN_SPAN,
    WHITESPACE,
    HiddenIndex,
    HiddenText,
    Shingles,
    normalise,
    redact,
)

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


# --- the fast normaliser is the documented one ------------------------------------------------

# The definition, as a regex over the whole text: every run of whitespace and line prefixes
# (Read's "   12<TAB>", Grep's "path:12:") is one gap, and a gap is one space.
REFERENCE_GAP = re.compile(r"(?:^[ ]*\d+\t|^[^\s:]+:\d+:|\s)+", re.MULTILINE)


def reference_normalise(text: str) -> tuple[str, list[int]]:
    pieces: list[str] = []
    origin: list[int] = []
    cursor = 0
    for gap in REFERENCE_GAP.finditer(text):
        pieces.append(text[cursor : gap.start()])
        origin.extend(range(cursor, gap.start()))
        pieces.append(" ")
        origin.append(gap.start())
        cursor = gap.end()
    pieces.append(text[cursor:])
    origin.extend(range(cursor, len(text)))
    return "".join(pieces), origin


gappy = st.text(alphabet="ab:12 \t\n\r\x1c\xa0\u2003x.", max_size=200)


@settings(max_examples=500, deadline=None)
@given(text=gappy)
def test_normalise_agrees_with_the_regex_definition(text: str) -> None:
    norm, origin = normalise(text)
    expected_norm, expected_origin = reference_normalise(text)
    assert norm == expected_norm
    assert origin.tolist() == expected_origin


def test_the_whitespace_table_is_what_str_split_and_regex_call_whitespace() -> None:
    everything = [c for c in range(0x110000) if chr(c).isspace()]
    assert list(WHITESPACE) == everything
    assert all(re.fullmatch(r"\s", chr(c)) for c in everything)


def test_lone_surrogates_and_astral_characters_are_filtered_too() -> None:
    body = "\U0001f600 emoji lead, then the hidden sentence that must never be shown here."
    index = HiddenIndex([body])
    shown = index.redact("\udc80 " + body[2:] + " \udcff")
    assert "never be shown" not in shown and shown.startswith("\udc80 ")


def test_a_hit_in_one_part_and_a_mask_that_shows_another() -> None:
    secret = "The vault opens with the brass key under the loose floorboard, twice."
    mine = "My own notes say the report is due on the last Friday of every month."
    shared = Shingles.merge([Shingles.build([HiddenText(secret, "s")]), Shingles.build([mine])])
    masked = HiddenIndex.of([(shared, np.array([True, False]))])
    assert "brass key" not in masked.redact(secret) and masked.redact(mine) == mine
    # Positive control: unmasked, both are withheld.
    assert HiddenIndex.of([(shared, None)]).redact(mine) != mine


def test_a_text_longer_than_one_chunk_is_checked_across_the_seams(monkeypatch) -> None:
    import skills_app.core.redact as redact_module

    monkeypatch.setattr(redact_module, "CHUNK", 64)
    index = HiddenIndex([BODY])
    for start in range(0, 120, 7):  # the quote starts at every offset around the seams
        text = "x" * start + " " + BODY[60:160] + " tail"
        shown = index.redact(text)
        assert "customer list" not in shown and shown.endswith(" tail"), start
