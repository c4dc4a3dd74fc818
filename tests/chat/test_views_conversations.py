from __future__ import annotations

import pytest
from django.test import Client

from skills_app.core.transcript import status_message_text
from skills_app.models import (
    Approval,
    Conversation,
    Message,
    Run,
    RunEvent,
    SkillInvocation,
    StreamPiece,
)
from skills_app.workspaces import workspace_for

pytestmark = pytest.mark.django_db

HIDDEN_BODY = (
    "Base directory for this skill: /ws/skills/notes\n\nSECRET-INSTRUCTIONS-7f3a: count words"
)


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _message(conversation, seq, role, text, **fields) -> Message:
    return Message.objects.create(
        conversation=conversation,
        seq=seq,
        role=role,
        content=fields.pop("content", [{"type": "text", "text": text}]),
        **fields,
    )


@pytest.fixture
def conversation(alice):
    return Conversation.objects.create(owner=alice, title="Quarterly notes")


@pytest.fixture
def skill_conversation(alice):
    """A conversation where the user loaded a skill with a slash command."""
    conversation = Conversation.objects.create(owner=alice, title="Skill talk")
    run = Run.objects.create(conversation=conversation, status=Run.DONE, is_demo=True)
    invocation = SkillInvocation.objects.create(
        conversation=conversation,
        run=run,
        skill="notes",
        caller="user",
        args="draft.md",
        decision="allowed",
        injected_text=HIDDEN_BODY,
    )
    _message(
        conversation,
        1,
        "user",
        status_message_text("notes", "draft.md"),
        kind="skill_status",
        run=run,
        invocation=invocation,
    )
    _message(
        conversation,
        2,
        "user",
        HIDDEN_BODY,
        kind="skill_prompt",
        is_meta=True,
        run=run,
        invocation=invocation,
    )
    _message(conversation, 3, "assistant", "Here is **the count**.", run=run)
    return conversation


# -- the list ---------------------------------------------------------------------------------


def test_it_lists_only_the_owners_conversations_newest_first(alice, bob):
    Conversation.objects.create(owner=alice, title="Older one")
    Conversation.objects.create(owner=alice, title="Newer one")
    Conversation.objects.create(owner=bob, title="Bob private plans")
    response = _client(alice).get("/")
    body = response.content.decode()
    assert response.status_code == 200
    assert body.index("Newer one") < body.index("Older one")
    assert "Bob private plans" not in body


def test_it_redirects_anonymous_users_to_login():
    response = Client().get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_it_refuses_posting_to_the_list(alice):
    assert _client(alice).post("/").status_code == 405


def test_it_searches_titles(alice, conversation):
    Conversation.objects.create(owner=alice, title="Holiday")
    body = _client(alice).get("/", {"q": "quarterly"}).content.decode()
    assert "Quarterly notes" in body
    assert "Holiday" not in body


def test_it_searches_visible_message_text(alice, conversation):
    other = Conversation.objects.create(owner=alice, title="Other")
    _message(conversation, 1, "user", "Where is the pelican report?")
    _message(other, 1, "user", "Nothing to see")
    body = _client(alice).get("/", {"q": "Pelican"}).content.decode()
    assert "Quarterly notes" in body
    assert "Other" not in body


def test_it_never_finds_conversations_by_hidden_text(alice, skill_conversation):
    body = _client(alice).get("/", {"q": "SECRET-INSTRUCTIONS"}).content.decode()
    assert "Skill talk" not in body
    assert "No conversations match" in body


def test_it_does_not_match_json_keys_when_searching(alice, conversation):
    _message(conversation, 1, "user", "hello")
    body = _client(alice).get("/", {"q": "type"}).content.decode()
    assert "Quarterly notes" not in body


def test_it_searches_only_the_owners_conversations(bob, conversation):
    _message(conversation, 1, "user", "pelican")
    body = _client(bob).get("/", {"q": "pelican"}).content.decode()
    assert "Quarterly notes" not in body


def test_it_returns_the_list_fragment_to_htmx(alice, conversation):
    response = _client(alice).get(
        "/", {"q": ""}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="conversation-list"
    )
    body = response.content.decode()
    assert body.lstrip().startswith('<ul id="conversation-list"')
    assert "<html" not in body


# -- new, rename, delete ----------------------------------------------------------------------


def test_it_creates_a_conversation_and_opens_it(alice):
    response = _client(alice).post("/c/new/")
    conversation = Conversation.objects.get(owner=alice)
    assert response.status_code == 302
    assert response["Location"] == f"/c/{conversation.pk}/"


def test_it_refuses_creating_with_get(alice):
    assert _client(alice).get("/c/new/").status_code == 405
    assert not Conversation.objects.exists()


def test_it_asks_anonymous_users_to_log_in_before_creating():
    response = Client().post("/c/new/")
    assert response.status_code == 302
    assert "/accounts/login/" in response["Location"]
    assert not Conversation.objects.exists()


def test_it_enforces_csrf_on_mutations(alice, conversation):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.post("/c/new/").status_code == 403
    assert client.post(f"/c/{conversation.pk}/rename/", {"title": "x"}).status_code == 403
    assert client.post(f"/c/{conversation.pk}/delete/").status_code == 403
    assert Conversation.objects.filter(pk=conversation.pk, title="Quarterly notes").exists()


def test_it_renames_a_conversation(alice, conversation):
    response = _client(alice).post(f"/c/{conversation.pk}/rename/", {"title": "  Budget  2025 "})
    conversation.refresh_from_db()
    assert response.status_code == 302
    assert conversation.title == "Budget 2025"


def test_it_returns_the_renamed_row_to_htmx(alice, conversation):
    response = _client(alice).post(
        f"/c/{conversation.pk}/rename/", {"title": "Budget"}, HTTP_HX_REQUEST="true"
    )
    body = response.content.decode()
    assert f'id="conversation-{conversation.pk}"' in body
    assert "Budget" in body


def test_it_rejects_an_empty_title(alice, conversation):
    response = _client(alice).post(f"/c/{conversation.pk}/rename/", {"title": "   "})
    conversation.refresh_from_db()
    assert response.status_code == 400
    assert conversation.title == "Quarterly notes"


def test_it_does_not_let_others_rename(bob, conversation):
    response = _client(bob).post(f"/c/{conversation.pk}/rename/", {"title": "Mine now"})
    conversation.refresh_from_db()
    assert response.status_code == 404
    assert conversation.title == "Quarterly notes"


def test_it_refuses_renaming_with_get(alice, conversation):
    assert _client(alice).get(f"/c/{conversation.pk}/rename/").status_code == 405


def test_it_redirects_anonymous_rename_to_login(conversation):
    response = Client().post(f"/c/{conversation.pk}/rename/", {"title": "x"})
    assert response.status_code == 302
    assert "/accounts/login/" in response["Location"]


def test_it_asks_for_confirmation_before_deleting(alice, conversation):
    response = _client(alice).get(f"/c/{conversation.pk}/delete/")
    assert response.status_code == 200
    assert "cannot be undone" in response.content.decode()
    assert Conversation.objects.filter(pk=conversation.pk).exists()


def test_it_deletes_on_post_by_hiding_the_conversation_from_its_owner(alice, conversation):
    client = _client(alice)
    response = client.post(f"/c/{conversation.pk}/delete/")
    assert response.status_code == 302
    assert response["Location"] == "/"
    conversation.refresh_from_db()
    assert conversation.deleted_at is not None and conversation.deleted_by == alice
    assert "Quarterly notes" not in client.get("/").content.decode()
    assert client.get(f"/c/{conversation.pk}/").status_code == 404
    assert client.post(f"/c/{conversation.pk}/delete/").status_code == 404


def test_the_confirmation_says_the_audit_keeps_the_record(alice, conversation):
    page = _client(alice).get(f"/c/{conversation.pk}/delete/").content.decode()
    assert "kept for the audit" in page


def test_it_does_not_let_others_delete(bob, conversation):
    assert _client(bob).get(f"/c/{conversation.pk}/delete/").status_code == 404
    assert _client(bob).post(f"/c/{conversation.pk}/delete/").status_code == 404
    assert Conversation.objects.filter(pk=conversation.pk).exists()


def test_it_refuses_deleting_with_put(alice, conversation):
    assert _client(alice).put(f"/c/{conversation.pk}/delete/").status_code == 405


def test_it_redirects_anonymous_delete_to_login(conversation):
    response = Client().post(f"/c/{conversation.pk}/delete/")
    assert response.status_code == 302
    assert Conversation.objects.filter(pk=conversation.pk).exists()


# -- the chat page ----------------------------------------------------------------------------


def test_it_shows_the_chat_page_to_the_owner(alice, conversation):
    body = _client(alice).get(f"/c/{conversation.pk}/").content.decode()
    assert 'id="transcript"' in body
    assert 'role="log"' in body
    assert 'aria-label="Message"' in body
    assert 'hx-ext="ws,chat-frames"' in body
    assert f'ws-connect="/ws/conversations/{conversation.pk}/"' in body
    # htmx and its websocket extension come from django-htmx, not a CDN.
    assert "/static/django_htmx/htmx-2.min.js" in body
    assert "/static/django_htmx/ext/hx-ws-2.min.js" in body
    # Without JavaScript the composer is a plain form that posts the message.
    assert f'action="/c/{conversation.pk}/act/"' in body and 'name="text"' in body


def test_it_hides_the_chat_page_from_others(bob, conversation):
    assert _client(bob).get(f"/c/{conversation.pk}/").status_code == 404


def test_it_redirects_anonymous_chat_to_login(conversation):
    assert Client().get(f"/c/{conversation.pk}/").status_code == 302


def test_it_refuses_posting_to_the_chat_page(alice, conversation):
    assert _client(alice).post(f"/c/{conversation.pk}/").status_code == 405


def test_it_shows_a_skill_chip_not_raw_tags(alice, skill_conversation):
    body = _client(alice).get(f"/c/{skill_conversation.pk}/").content.decode()
    assert 'The "notes" skill loaded' in body and 'data-state="loaded"' in body
    assert "draft.md" in body
    assert "<command-message>" not in body
    assert "&lt;command-message&gt;" not in body
    assert "command-name" not in body


def test_it_never_puts_hidden_text_in_the_page_of_an_ordinary_user(alice, skill_conversation):
    body = _client(alice).get(f"/c/{skill_conversation.pk}/").content.decode()
    assert "SECRET-INSTRUCTIONS" not in body
    assert "Base directory for this skill" not in body


def test_it_shows_hidden_text_to_an_auditor_marked_as_hidden(auditor, skill_conversation):
    skill_conversation.owner = auditor
    skill_conversation.save()
    body = _client(auditor).get(f"/c/{skill_conversation.pk}/").content.decode()
    assert "SECRET-INSTRUCTIONS-7f3a" in body
    assert "Hidden from the user · sent to the model" in body


def test_it_renders_assistant_markdown_and_labels_the_demo_model(alice, skill_conversation):
    body = _client(alice).get(f"/c/{skill_conversation.pk}/").content.decode()
    assert "<strong>the count</strong>" in body
    assert "Demo model" in body


def test_it_escapes_user_text(alice, conversation):
    _message(conversation, 1, "user", "<script>alert('x')</script>")
    body = _client(alice).get(f"/c/{conversation.pk}/").content.decode()
    assert "<script>alert" not in body
    assert "&lt;script&gt;alert" in body


def test_it_groups_tool_calls_with_their_results(alice, conversation):
    _message(
        conversation,
        1,
        "assistant",
        "",
        content=[
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls out"}},
        ],
    )
    _message(
        conversation,
        2,
        "user",
        "",
        kind="tool_result",
        content=[
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "boom", "is_error": True}
        ],
    )
    body = _client(alice).get(f"/c/{conversation.pk}/").content.decode()
    assert 'id="tool-toolu_1"' in body
    assert "ls out" in body
    assert "boom" in body
    assert 'class="tool is-error"' in body


def test_it_marks_interrupted_text_and_offers_retry_on_the_failed_turn(alice, conversation):
    excluded = {"excluded": "failed"}
    _message(conversation, 1, "user", "Go", meta={**excluded, "excluded_turn_start": True})
    _message(conversation, 2, "assistant", "Half an ans", meta={**excluded, "partial": True})
    _message(
        conversation,
        3,
        "assistant",
        "The model is unavailable.",
        kind="error",
        to_model=False,
        meta={"code": "overloaded", "retry": True},
    )
    body = _client(alice).get(f"/c/{conversation.pk}/").content.decode()
    assert "(interrupted)" in body
    assert "The model is unavailable." in body
    assert body.count('data-action="retry"') == 1


def test_it_offers_no_retry_on_an_error_that_cannot_be_retried(alice, conversation):
    _message(conversation, 1, "user", "/ghost", kind="command", to_model=False)
    _message(conversation, 2, "assistant", "Unknown skill: ghost.", kind="error", to_model=False)
    body = _client(alice).get(f"/c/{conversation.pk}/").content.decode()
    assert "Unknown skill: ghost." in body
    assert 'data-action="retry"' not in body


def test_it_renders_pending_approvals_so_they_survive_reload(alice, conversation):
    run = Run.objects.create(conversation=conversation, status=Run.WAITING)
    approval = Approval.objects.create(
        conversation=conversation,
        run=run,
        tool="Bash",
        input={"command": "rm -rf work"},
        call_text="Bash(rm -rf work)",
        rule_text="Bash(rm *)",
        reason="matches an ask rule",
    )
    body = _client(alice).get(f"/c/{conversation.pk}/").content.decode()
    assert f'id="approval-{approval.pk}"' in body
    assert "Allow for this conversation" in body
    assert "Bash(rm *)" in body
    assert 'id="stop-button"' in body
    assert 'data-run-status="running" hidden' not in body
    assert 'data-run-status="running"' in body


def test_it_includes_the_text_streamed_so_far_for_an_active_run(alice, conversation):
    run = Run.objects.create(conversation=conversation, status=Run.RUNNING)
    RunEvent.objects.create(
        conversation=conversation, run=run, seq=1, type="model.call", data={"call": 1}
    )
    # The streamed text as the live text's journal holds it (committed before it was sent).
    for offset, piece in ((0, "Hello "), (6, "wor")):
        StreamPiece.objects.create(run=run, call=1, index=0, kind="text", offset=offset, text=piece)
    Conversation.objects.filter(pk=conversation.pk).update(last_event_seq=1)
    body = _client(alice).get(f"/c/{conversation.pk}/").content.decode()
    assert "Hello wor</div>" in body
    assert 'id="chat-seq" hidden data-seq="1"' in body


def test_it_explains_the_demo_model_when_no_key_is_set(alice, conversation, settings):
    settings.ANTHROPIC_API_KEY = ""
    body = _client(alice).get(f"/c/{conversation.pk}/").content.decode()
    assert "Demo model (offline)" in body
    # Server settings are for staff; an ordinary user is told whom to ask (issue 29).
    assert "ANTHROPIC_API_KEY" not in body and "Ask your administrator" in body


# -- artifacts --------------------------------------------------------------------------------


@pytest.fixture
def artifact(conversation):
    workspace = workspace_for(conversation.pk)
    (workspace.root / "out").mkdir(parents=True, exist_ok=True)
    (workspace.root / "out" / "report.md").write_text("# Report\n")
    (workspace.root / "work").mkdir(parents=True, exist_ok=True)
    (workspace.root / "work" / "scratch.txt").write_text("scratch")
    return workspace


def test_it_serves_an_artifact_to_the_owner(alice, conversation, artifact):
    response = _client(alice).get(f"/c/{conversation.pk}/files/out/report.md")
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == b"# Report\n"
    assert "attachment" in response["Content-Disposition"]


def test_it_hides_artifacts_from_others(bob, conversation, artifact):
    assert _client(bob).get(f"/c/{conversation.pk}/files/out/report.md").status_code == 404


def test_it_serves_only_files_under_out(alice, conversation, artifact):
    client = _client(alice)
    assert client.get(f"/c/{conversation.pk}/files/work/scratch.txt").status_code == 404
    # A path that climbs out is a bad request, said plainly; it never reaches the file.
    climbing = client.get(f"/c/{conversation.pk}/files/out/../work/scratch.txt")
    assert climbing.status_code == 400 and b"scratch" not in climbing.content
    encoded = client.get(f"/c/{conversation.pk}/files/out/%2e%2e/work/scratch.txt")
    assert encoded.status_code == 400 and b"scratch" not in encoded.content
    assert client.get(f"/c/{conversation.pk}/files/out/missing.md").status_code == 404


def test_it_refuses_symlinks_that_leave_out(alice, conversation, artifact, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    (artifact.root / "out" / "link.txt").symlink_to(secret)
    assert _client(alice).get(f"/c/{conversation.pk}/files/out/link.txt").status_code == 404


def test_it_links_artifacts_from_tool_results(alice, conversation):
    _message(
        conversation,
        1,
        "assistant",
        "",
        content=[
            {
                "type": "tool_use",
                "id": "toolu_9",
                "name": "Write",
                "input": {"file_path": "out/r.md"},
            }
        ],
    )
    _message(
        conversation,
        2,
        "user",
        "",
        kind="tool_result",
        content=[{"type": "tool_result", "tool_use_id": "toolu_9", "content": "Wrote out/r.md"}],
    )
    RunEvent.objects.create(
        conversation=conversation,
        seq=1,
        type="tool.result",
        data={"tool_use_id": "toolu_9", "name": "Write", "artifacts": ["out/r.md"]},
    )
    body = _client(alice).get(f"/c/{conversation.pk}/").content.decode()
    assert f'href="/c/{conversation.pk}/files/out/r.md"' in body
