"""Another person's words never leave in an MCP call (docs/mcp.md "What a call may carry").

Bob types a long, distinctive message in his conversation. Alice's model then quotes it in a
call to the toy HTTP server: the call is refused before it leaves (the server writes no marker),
the refusal is a recorded decision whose kept arguments withhold Bob's words, and the model gets
an error result saying why. Controls: a call with ordinary text leaves, and so does one quoting
words Alice sent herself, however many others wrote the same.
"""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from skills_app.core.fingerprints import GUARANTEED, SPAN
from skills_app.models import Conversation, PermissionDecision, PermissionRule
from skills_app.runs import supervisor as runs
from skills_app.sent_texts import others_words, remember
from skills_app.workspaces import workspace_for
from tests.mcp.test_filter import _results
from tests.mcp.test_mcp import http_server_named, listed_and_approved, place_in
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import run_turn, use_fake_model

BOB_SAYS = (
    "Between us: the Harwick acquisition closes on 9 March at 41.20 a share, and the "
    "Leeds team will be told the week after; keep it out of every channel until then."
)
SHARED = (
    "Permission is hereby granted, free of charge, to any person obtaining a copy of this "
    "software and associated documentation files"
)


@pytest.mark.django_db(transaction=True)
async def test_another_persons_message_quoted_in_a_call_never_leaves(
    alice, bob, settings, fake_anthropic, http_server
):
    use_fake_model(settings, fake_anthropic, retries=0)
    settings.RATE_LIMIT_MESSAGES_PER_MINUTE = 1000
    await PermissionRule.objects.acreate(behavior="allow", rule_text="mcp__toy")
    # Bob's words, sent in his own conversation; the licence text both of them sent.
    bobs = await Conversation.objects.acreate(owner=bob, title="bob's")
    fake_anthropic.enqueue(Reply.text("noted"), Reply.text("noted"))
    assert (await run_turn(bobs, BOB_SAYS, bob)).status == "done"
    assert (await run_turn(bobs, SHARED, bob)).status == "done"
    conversation = await Conversation.objects.acreate(owner=alice, title="alice's")
    server = await sync_to_async(http_server_named)(bob, http_server, everyone=True)
    await listed_and_approved(server, place_in(workspace_for(conversation.pk).root), alice)
    fake_anthropic.enqueue(
        Reply.tool_use(
            "mcp__toy__touch_marker", {"label": "quoted", "note": f"From the chat: {BOB_SAYS}"}
        ),
        Reply.tool_use("mcp__toy__touch_marker", {"label": "plain", "note": "a short note"}),
        Reply.tool_use("mcp__toy__touch_marker", {"label": "own", "note": SHARED}),
        Reply.text("done"),
    )
    run = await run_turn(conversation, f"file this: {SHARED}", alice)
    assert run.status == "done"
    # Checked on the server's side: the quoting call never reached it, the controls did.
    assert not (http_server.folder / "marker-quoted").exists()
    assert (http_server.folder / "marker-plain").read_text() == "called\na short note"
    assert (http_server.folder / "marker-own").read_text() == f"called\n{SHARED}"
    results = await sync_to_async(_results)(conversation)
    refused = json.dumps(results[0]["content"])
    assert results[0]["is_error"] is True and "another person" in refused
    decisions = [
        d async for d in PermissionDecision.objects.filter(conversation=conversation).order_by("pk")
    ]
    assert [(d.decision, d.source) for d in decisions] == [
        ("refused", "hidden"),
        ("allow", "admin"),
        ("allow", "admin"),
    ]
    assert "another person" in decisions[0].reason
    # The record keeps the call, not Bob's words.
    kept = json.dumps(decisions[0].input)
    assert "acquisition" not in kept and "another person's words withheld" in kept


@pytest.mark.django_db
def test_only_long_spans_count_and_a_persons_own_words_never_do(alice, bob):
    remember(bob.pk, [BOB_SAYS])
    # A span of GUARANTEED characters is always found; one shorter than SPAN never is.
    long_span = BOB_SAYS[5 : 5 + GUARANTEED]
    assert others_words(alice.pk, {"a": [f"see {long_span} ok"]}) == {f"see {long_span} ok"}
    assert others_words(alice.pk, {"a": BOB_SAYS[5 : 5 + SPAN - 1]}) == set()
    # Whitespace does not hide it (the filter reads text as the hidden-content filter does).
    assert others_words(alice.pk, "\n  ".join(BOB_SAYS.split(" "))) != set()
    assert others_words(bob.pk, BOB_SAYS) == set()
    remember(alice.pk, [BOB_SAYS])
    assert others_words(alice.pk, BOB_SAYS) == set()


@pytest.mark.django_db(transaction=True)
async def test_a_text_file_another_person_attached_counts_as_theirs(
    alice, bob, settings, fake_anthropic
):
    use_fake_model(settings, fake_anthropic, retries=0)
    conversation = await Conversation.objects.acreate(owner=bob, title="files")
    client = Client()
    await sync_to_async(client.force_login)(bob)
    notes = f"Minutes, board meeting\n\n{BOB_SAYS}\n".encode()
    uploaded = await sync_to_async(client.post)(
        f"/c/{conversation.pk}/attach/", {"file": [SimpleUploadedFile("minutes.txt", notes)]}
    )
    assert uploaded.status_code == 200, uploaded.content
    ids = [chip["id"] for chip in uploaded.json()["attachments"]]
    # Attached but not sent: not yet what Bob sent.
    assert await sync_to_async(others_words)(alice.pk, BOB_SAYS) == set()
    fake_anthropic.enqueue(Reply.text("Read it."))
    run = await runs.start_run(conversation.pk, "see the file", user_id=bob.pk, attachments=ids)
    await runs.wait_for_run(run.pk, timeout=30)
    assert await sync_to_async(others_words)(alice.pk, {"q": BOB_SAYS}) == {BOB_SAYS}
