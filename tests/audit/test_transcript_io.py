from __future__ import annotations

import json
import uuid

import pytest
from asgiref.sync import sync_to_async
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from skills_app.audit.transcript_io import (
    TranscriptImportError,
    export_lines,
    import_transcript,
    line_uuid,
)
from skills_app.core.cc_transcript import parse_transcript
from skills_app.core.transcript import StoredMessage
from skills_app.models import Conversation, Message, PermissionRule
from skills_app.runs import agent_setup, store
from tests.support.fake_anthropic import Reply, validate_request
from tests.support.loop_helpers import run_turn, use_fake_model, write_skills


def export_text(conversation: Conversation, *, include_hidden: bool) -> str:
    return "".join(export_lines(conversation, include_hidden=include_hidden))


SECRET = "IMPORT-HIDDEN-SECRET-4410"


def jsonl(*records) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def user(text, **extra):
    return {"type": "user", "message": {"role": "user", "content": text}, **extra}


def assistant(content, **extra):
    return {"type": "assistant", "message": {"role": "assistant", "content": content}, **extra}


def api_valid(conversation: Conversation) -> str | None:
    """The API's verdict on the stored history followed by a new user message."""
    kwargs = agent_setup.build_request(conversation).as_kwargs()
    messages = [*kwargs["messages"], {"role": "user", "content": [{"type": "text", "text": "go"}]}]
    if len(messages) > 1 and messages[-2]["role"] == "user":
        messages[-2]["content"].extend(messages.pop()["content"])
    return validate_request({**kwargs, "messages": messages})


@pytest.fixture
def conversation(alice):
    conv = Conversation.objects.create(owner=alice, title="io")
    for message in (
        StoredMessage.text("user", "hi there"),
        StoredMessage.text("user", f"Base directory for this skill: /x\n\n{SECRET}", is_meta=True),
        StoredMessage.text("assistant", "hello"),
    ):
        store.append_message(conv.pk, message)
    return conv


# -- export -------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_it_exports_one_claude_code_line_per_row_with_a_parent_chain(conversation):
    lines = [
        json.loads(line) for line in export_text(conversation, include_hidden=True).splitlines()
    ]
    assert [line["type"] for line in lines] == ["user", "user", "assistant"]
    assert lines[0]["parentUuid"] is None
    assert [line["parentUuid"] for line in lines[1:]] == [line["uuid"] for line in lines[:-1]]
    assert {line["sessionId"] for line in lines} == {str(conversation.session_id)}
    assert lines[1]["isMeta"] is True and lines[1]["kind"] == "text"
    assert lines[2]["message"] == {
        "id": f"msg_{uuid.UUID(lines[2]['uuid']).hex}",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "hello"}],
        "model": "unknown",
    }
    # The envelope Claude Code writes and its readers require.
    assert all(
        line["isSidechain"] is False and line["userType"] == "external" and line["cwd"] == "/"
        for line in lines
    )
    assert lines[0]["timestamp"].endswith("Z")
    assert lines[0]["uuid"] == line_uuid(conversation, 1)


@pytest.mark.django_db
def test_it_gives_the_same_uuids_on_every_export(conversation):
    assert export_text(conversation, include_hidden=True) == export_text(
        conversation, include_hidden=True
    )


@pytest.mark.django_db
def test_it_leaves_hidden_rows_out_entirely_and_keeps_the_chain(conversation):
    text = export_text(conversation, include_hidden=False)
    assert SECRET not in text and "Base directory" not in text
    lines = [json.loads(line) for line in text.splitlines()]
    assert len(lines) == 2
    assert lines[1]["parentUuid"] == lines[0]["uuid"]


# -- import -------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_it_imports_messages_inferring_their_kinds(alice):
    data = jsonl(
        user("look at this"),
        user(
            '<command-message>The "pdf" skill is loading</command-message>\n<command-name>pdf</command-name>\n<command-args>a.pdf</command-args>'
        ),
        user("Base directory for this skill: /s\n\nBODY", isMeta=True),
        assistant([{"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a"}}]),
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}],
            },
        },
        assistant([{"type": "text", "text": "Oops"}], kind="error", toModel=False),
        assistant("done"),
    )
    result = import_transcript(alice.pk, data)
    rows = list(result.conversation.messages.order_by("seq"))
    assert [r.kind for r in rows] == [
        "text", "skill_status", "skill_prompt", "tool_use", "tool_result", "error", "text"
    ]  # fmt: skip
    assert [r.is_meta for r in rows] == [False, False, True, False, False, False, False]
    assert [r.to_model for r in rows] == [True] * 5 + [False, True]
    assert rows[1].meta["skill"] == "pdf" and rows[1].meta["args"] == "a.pdf"
    assert rows[0].content == [{"type": "text", "text": "look at this"}]
    assert result.conversation.owner == alice
    assert result.conversation.title == "Imported: look at this"
    assert result.hidden == 1
    assert api_valid(result.conversation) is None


@pytest.mark.django_db
def test_it_skips_other_claude_code_line_types_and_keeps_thinking_blocks(alice):
    data = jsonl(
        {"type": "summary", "summary": "A chat", "leafUuid": "x"},
        user("q"),
        assistant(
            [
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "text", "text": "a"},
            ]
        ),
    )
    parsed = parse_transcript(data)
    assert (len(parsed.messages), parsed.other_lines, parsed.thinking_blocks) == (
        2,
        {"summary": 1},
        1,
    )
    assert parsed.skipped == ()
    assert parsed.messages[1].content[0] == {
        "type": "thinking",
        "thinking": "hmm",
        "signature": "sig",
    }


THOUGHT = "THOUGHT-SUMMARY-3391: the user wants the files counted."


@pytest.mark.django_db(transaction=True)
async def test_thinking_is_exported_imported_shown_and_never_replayed(
    settings, fake_anthropic, tmp_path, alice
):
    """Round trip: a thinking model's answer is exported with its thinking, imported, shown in
    the bubble, and the import's next request goes without it (another key's signature)."""
    use_fake_model(settings, fake_anthropic)
    settings.SKILLS_DIRS = []
    settings.ANTHROPIC_THINKING = True
    source = await Conversation.objects.acreate(owner=alice, title="thinking")
    fake_anthropic.enqueue(Reply.text("Three files."))
    await run_turn(source, "count the files", alice)
    answer = await Message.objects.filter(conversation=source, role="assistant").afirst()
    assert answer.content[0]["type"] == "thinking" and answer.content[0]["signature"]

    exported = await sync_to_async(export_text)(source, include_hidden=False)
    assert answer.content[0]["thinking"] in exported and answer.content[0]["signature"] in exported
    result = await sync_to_async(import_transcript)(alice.pk, exported.encode())
    assert result.thinking_blocks == 1
    imported = await Message.objects.filter(
        conversation=result.conversation, role="assistant"
    ).afirst()
    assert imported.content == answer.content and imported.meta["foreign_thinking"] is True

    # The fake server rejects thinking it did not sign, like the API; a new server never signed it.
    fake_anthropic.thinking = type(fake_anthropic.thinking)()
    fake_anthropic.enqueue(Reply.text("Still three."))
    run = await run_turn(result.conversation, "and now?", alice)
    assert run.status == "done", run.error
    sent = fake_anthropic.requests[-1]
    assert sent.status == 200 and answer.content[0]["signature"] not in json.dumps(sent["messages"])
    assert "Three files." in json.dumps(sent["messages"])


@pytest.mark.django_db
def test_thinking_must_be_well_formed_and_the_assistants(alice):
    bad = assistant([{"type": "thinking", "thinking": 5}])
    parsed = parse_transcript(jsonl(user("q"), bad))
    assert [(s.line, s.reason) for s in parsed.skipped] == [
        (2, 'content block 1 (thinking): "thinking" and "signature" are not strings')
    ]
    parsed = parse_transcript(
        jsonl(user("q"), user([{"type": "thinking", "thinking": "x", "signature": "s"}]))
    )
    assert (
        parsed.skipped[0].line == 2 and "only assistant messages think" in parsed.skipped[0].reason
    )


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("lines", "line", "message"),
    [
        ([user("a"), "{not json"], 2, "not valid JSON"),
        ([user("a"), [1, 2]], 2, "not a JSON object"),
        ([user("a"), {"message": {"role": "user", "content": "a"}}], 2, 'no "type"'),
        ([user("a"), {"type": "assistant", "message": {"role": "user", "content": "x"}}], 2, "message.role"),
        ([user("a"), {"type": "user", "message": {"role": "user", "content": 5}}], 2, "neither text nor a list"),
        ([user("a"), user("b", isMeta="yes")], 2, '"isMeta" is \'yes\', not true or false'),
        ([user("a"), user([{"type": "tool_result", "tool_use_id": "nope", "content": ""}])], 2, "answers no earlier tool call"),
        ([user("a"), user([{"type": "video"}])], 2, "not a block type this app stores"),
        ([user("a"), assistant([{"type": "tool_use", "id": "t", "name": "Read", "input": {}}]), assistant("b"),
          user([{"type": "tool_result", "tool_use_id": "t", "content": ""}])], 4, "does not follow its call"),
        ([user("a"), user([{"type": "tool_use", "id": "t", "name": "Read", "input": {}}])], 2, "only assistant"),
    ],
)  # fmt: skip
def test_it_skips_an_unusable_line_names_it_and_imports_the_rest(alice, lines, line, message):
    data = "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines)
    result = import_transcript(alice.pk, data)
    assert [s.line for s in result.skipped] == [line]
    assert message in result.skipped[0].reason
    assert result.conversation.messages.filter(role="user").first().content == [
        {"type": "text", "text": "a"}
    ]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["{not json", [1]], "No line of the file could be used (line 1: not valid JSON"),
        ([{"type": "summary"}], 'no "user" or "assistant" messages (only summary lines)'),
        ([user([{"type": "video"}])], "line 1: content block 1 (video) is not a block type"),
    ],
)
def test_it_refuses_a_file_with_nothing_usable_and_creates_nothing(alice, lines, message):
    data = "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines)
    before = (Conversation.objects.count(), Message.objects.count())
    with pytest.raises(TranscriptImportError) as caught:
        import_transcript(alice.pk, data)
    assert message in str(caught.value)
    assert (Conversation.objects.count(), Message.objects.count()) == before


@pytest.mark.django_db
def test_a_line_that_is_not_utf8_is_skipped_not_the_file(alice):
    result = import_transcript(
        alice.pk, b'{"type": "user", "message": {"content": "hi"}}\n"\xff\xfe"\n'
    )
    assert [(s.line, s.reason) for s in result.skipped] == [(2, "not UTF-8 text")]
    assert result.messages == 1


# -- the views ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_it_sends_anonymous_visitors_of_the_import_page_to_login(client):
    response = client.get(reverse("transcript-import"))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


@pytest.mark.django_db
def test_it_imports_an_uploaded_file_into_a_new_conversation_of_the_uploader(client, bob):
    client.force_login(bob)
    assert client.get(reverse("transcript-import")).status_code == 200
    upload = SimpleUploadedFile("t.jsonl", jsonl(user("hello"), assistant("hi")).encode())
    response = client.post(reverse("transcript-import"), {"file": upload, "title": "Mine"})
    conversation = Conversation.objects.get(owner=bob)
    assert response.status_code == 302
    assert response["Location"] == reverse("transcript-import-result", args=[conversation.pk])
    assert conversation.title == "Mine"
    assert conversation.messages.count() == 2
    page = client.get(response["Location"]).content.decode()
    assert "2 messages stored" in page and "Every line was used." in page
    assert reverse("conversation", args=[conversation.pk]) in page


@pytest.mark.django_db
def test_the_result_page_lists_skipped_lines_with_their_reasons(client, bob):
    client.force_login(bob)
    upload = SimpleUploadedFile("t.jsonl", (jsonl(user("hello")) + "oops\n").encode())
    response = client.post(reverse("transcript-import"), {"file": upload})
    assert response.status_code == 302
    page = client.get(response["Location"]).content.decode()
    assert "1 line skipped" in page
    assert "<td>2</td><td>not valid JSON (Expecting value)</td>" in page
    assert Conversation.objects.get(owner=bob).messages.count() == 1


@pytest.mark.django_db
def test_the_result_page_is_its_owners_only(client, bob, alice):
    client.force_login(bob)
    upload = SimpleUploadedFile("t.jsonl", jsonl(user("hello")).encode())
    location = client.post(reverse("transcript-import"), {"file": upload})["Location"]
    client.force_login(alice)
    assert client.get(location).status_code == 404


@pytest.mark.django_db
def test_it_shows_why_nothing_was_imported(client, bob):
    client.force_login(bob)
    upload = SimpleUploadedFile("t.jsonl", b"oops\n[1]\n")
    response = client.post(reverse("transcript-import"), {"file": upload})
    assert response.status_code == 400
    assert "Nothing was imported. No line of the file could be used (line 1: not valid JSON" in (
        response.content.decode()
    )
    assert not Conversation.objects.filter(owner=bob).exists()


@pytest.mark.django_db(transaction=True)
async def test_an_exported_run_imports_back_with_the_same_rows(
    settings, fake_anthropic, tmp_path, alice, auditor, bob, client
):
    """Round trip through the real views: export as an inspector, import as another user."""
    settings.SKILLS_DIRS = [write_skills(tmp_path / "skills")]
    use_fake_model(settings, fake_anthropic)
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill(greeter)")
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill(switcher)")
    conversation = await Conversation.objects.acreate(owner=alice, title="round trip")
    fake_anthropic.enqueue(
        Reply.tool_use("Skill", {"skill": "greeter", "args": "Bob"}, text="Loading it."),
        Reply.tool_use("Read", {"file_path": "missing.txt"}),
        Reply.text("Hello Bob."),
        Reply.text("Switched."),
    )
    await run_turn(conversation, "greet Bob", alice)
    await run_turn(conversation, "/switcher now", alice)

    await sync_to_async(client.force_login)(auditor)
    export_url = reverse("conversation-export", args=[conversation.pk])
    exported = (await sync_to_async(client.get)(export_url)).content
    await sync_to_async(client.force_login)(bob)
    upload = SimpleUploadedFile("round.jsonl", exported)
    response = await sync_to_async(client.post)(reverse("transcript-import"), {"file": upload})
    assert response.status_code == 302, response.content

    copy = await Conversation.objects.aget(owner=bob)
    fields = ("role", "content", "is_meta", "to_model", "kind")

    def rows(conv):
        return list(conv.messages.order_by("seq").values_list(*fields))

    original, imported = await sync_to_async(rows)(conversation), await sync_to_async(rows)(copy)
    assert imported == original
    assert any(is_meta for _r, _c, is_meta, _t, _k in original)  # the hidden body came along
    assert {kind for *_rest, kind in original} >= {"skill_status", "skill_prompt", "tool_result"}
    assert await sync_to_async(api_valid)(copy) is None
