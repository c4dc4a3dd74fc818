"""One action row per answer (issue 42 point 7): a turn of several assistant rows (text, a tool
call, more text) shows its cost, Regenerate and thumbs once, under its last row, with the turn's
cost summed; pushed live, each new row of the turn carries the footer until a later one lands."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from skills_app.chat.rendering import render_message
from skills_app.core.transcript import StoredMessage, tool_result_block
from skills_app.models import Conversation, Run, rows_with_ids
from skills_app.runs import store

pytestmark = pytest.mark.django_db

# $5 per million input tokens and $25 per million output tokens (Claude Opus 4.8).
FIRST = {"input_tokens": 1000, "output_tokens": 100}  # $0.0050 + $0.0025
SECOND = {"input_tokens": 2000, "output_tokens": 200}  # $0.0100 + $0.0050


def _answer(conv, run, content, usage) -> object:
    message = StoredMessage(
        role="assistant",
        content=tuple(content),
        kind="tool_use" if any(b["type"] == "tool_use" for b in content) else "text",
        meta={"usage": usage, "model": "claude-opus-4-8"},
    )
    return store.append_message(conv.pk, message, run_id=run.pk)


@pytest.fixture
def turn(alice):
    """A question, and an answer of two rows: some text and a tool call, then the final text."""
    conv = Conversation.objects.create(owner=alice, title="Counting")
    run = Run.objects.create(conversation=conv, status=Run.DONE, model="claude-opus-4-8")
    store.append_message(conv.pk, StoredMessage.text("user", "How many files?"), run_id=run.pk)
    call = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}
    first = _answer(conv, run, [{"type": "text", "text": "Let me look."}, call], FIRST)
    result = tool_result_block("toolu_1", "a.txt\nb.txt")
    store.append_message(
        conv.pk, StoredMessage(role="user", content=(result,), kind="tool_result"), run_id=run.pk
    )
    return conv, run, first


def _page_at(user, url: str) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def _page(user, conv) -> str:
    return _page_at(user, reverse("conversation", args=[conv.pk]))


def test_a_turn_of_several_rows_has_one_footer_with_the_turns_cost(alice, turn):
    conv, run, first = turn
    last = _answer(conv, run, [{"type": "text", "text": "There are two files."}], SECOND)
    page = _page(alice, conv)
    assert page.count('class="usage"') == 1
    assert page.count('class="regenerate-form"') == 1
    assert page.count('class="feedback"') == 1
    assert page.count(f'data-turn="run-{run.pk}"') == 2
    # The footer sits under the last row, and counts both model calls.
    footer_row = re.search(r'<div class="row row-assistant turn-end" id="message-(\d+)"', page)
    assert footer_row and int(footer_row.group(1)) == last.pk
    assert '<span class="usage-summary">$0.0225</span>' in page
    assert "3,000 input tokens" in page and "300 output tokens" in page


def test_a_row_pushed_live_carries_the_footer_until_a_later_row_of_its_turn(alice, turn):
    conv, run, first = turn
    # Pushed live as the turn's newest row: it ends the turn so far.
    alone = render_message(first, can_inspect=False)
    assert "turn-end" in alone and 'class="usage"' in alone and "regenerate-form" in alone
    assert '<span class="usage-summary">$0.0075</span>' in alone
    _answer(conv, run, [{"type": "text", "text": "There are two files."}], SECOND)
    # Rendered again (a replay, an update), it has no footer: the later row has it.
    again = render_message(first, can_inspect=False)
    assert "turn-end" not in again and 'class="usage"' not in again
    assert "regenerate-form" not in again and 'class="feedback"' not in again


# --- Versions of a regenerated answer (issue 42 point 8) ---------------------------------------


def _row_of(page: str, pk: int) -> str:
    """The opening tag of the row `message-<pk>`."""
    found = re.search(rf'<div class="[^"]*"[^>]* id="message-{pk}"[^>]*>', page)
    assert found, f"message-{pk} is not on the page"
    return found.group(0)


def test_regenerated_answers_are_versions_with_their_notes_and_the_newest_shown(alice, auditor):
    conv = Conversation.objects.create(owner=alice, title="Versions")
    question = store.append_message(conv.pk, StoredMessage.text("user", "Name a colour."))
    first = Run.objects.create(conversation=conv, status=Run.STOPPED, model="claude-opus-4-8")
    old = _answer(conv, first, [{"type": "text", "text": "Perhaps blu"}], FIRST)
    stopped = store.append_message(conv.pk, store.stop_note(), run_id=first.pk)
    store.replace_latest(conv.pk, "regenerate")
    second = Run.objects.create(conversation=conv, status=Run.DONE, model="claude-opus-4-8")
    middle = _answer(conv, second, [{"type": "text", "text": "Green."}], FIRST)
    store.replace_latest(conv.pk, "regenerate")
    third = Run.objects.create(conversation=conv, status=Run.DONE, model="claude-opus-4-8")
    newest = _answer(conv, third, [{"type": "text", "text": "Red."}], SECOND)

    page = _page(alice, conv)
    # The question is no version; each answer row and the stopped run's note are of theirs.
    assert "data-version" not in _row_of(page, question.pk)
    assert f'data-answer="{question.seq}" data-version="1"' in _row_of(page, old.pk)
    assert 'data-version="1"' in _row_of(page, stopped.pk)
    assert "version-hidden" in _row_of(page, stopped.pk)
    assert 'data-version="2"' in _row_of(page, middle.pk)
    assert "version-hidden" in _row_of(page, middle.pk)
    assert 'data-version="3"' in _row_of(page, newest.pk)
    assert "version-hidden" not in _row_of(page, newest.pk)
    # Each version's footer offers the others; the newest can go back only.
    for n in (1, 2, 3):
        assert page.count(f"Version {n} of 3") == 1
    newest_html = page[page.index(f'id="message-{newest.pk}"') :]
    assert '<span class="version-count" aria-hidden="true">3/3</span>' in newest_html
    assert 'aria-label="Previous version">' in newest_html
    assert 'aria-label="Next version" disabled>' in newest_html
    # The model is sent the newest version only.
    _ids, rows = rows_with_ids(conv.pk)
    sent = [r.plain_text for r in rows if r.sent_to_model]
    assert sent == ["Name a colour.", "Red."]
    # The audit shows every version as stored, none hidden, each row with its own call's cost.
    audit = _page_at(auditor, reverse("audit-conversation", args=[conv.pk]))
    assert "version-hidden" not in audit and "data-version" not in audit
    assert audit.count('class="usage"') == 3


def test_a_regeneration_that_failed_before_answering_offers_the_earlier_version(alice):
    conv = Conversation.objects.create(owner=alice, title="Failed again")
    store.append_message(conv.pk, StoredMessage.text("user", "Name a colour."))
    first = Run.objects.create(conversation=conv, status=Run.DONE, model="claude-opus-4-8")
    old = _answer(conv, first, [{"type": "text", "text": "Blue."}], FIRST)
    store.replace_latest(conv.pk, "regenerate")
    second = Run.objects.create(conversation=conv, status=Run.FAILED, model="claude-opus-4-8")
    failed = store.append_message(
        conv.pk,
        StoredMessage.text("assistant", "The model is overloaded.", kind="error", to_model=False),
        run_id=second.pk,
    )
    page = _page(alice, conv)
    assert "version-hidden" in _row_of(page, old.pk)
    # The error is the newest version, and says so: the earlier answer stays one click away.
    assert 'data-version="2"' in _row_of(page, failed.pk)
    error_html = page[page.index(f'id="message-{failed.pk}"') :]
    assert "Version 2 of 2" in error_html and 'aria-label="Previous version">' in error_html
    assert page.count('class="versions"') == 2
