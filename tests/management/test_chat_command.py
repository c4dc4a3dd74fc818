from __future__ import annotations

import io
import re
import threading
import time

import pytest
from django.core.management import CommandError, call_command
from django.db import transaction

from skills_app.core.titles import DEFAULT_TITLE, title_from_message
from skills_app.models import Conversation, Message, PermissionRule, QueuedMessage, Run
from skills_app.runs import pending

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("demo_model")]


def chat(*args):
    out = io.StringIO()
    call_command("chat", *args, stdout=out)
    return out.getvalue()


def test_it_sends_a_message_and_prints_the_visible_turn(admin_user):
    output = chat("hello there")
    assert output.startswith("[conversation ")
    assert "Demo model (offline)" in output
    assert "you: hello there" in output
    conversation_id = int(re.search(r"conversation id: (\d+)", output).group(1))
    assert Conversation.objects.get(pk=conversation_id).owner == admin_user


def test_it_runs_a_skill_and_never_prints_the_hidden_text(admin_user):
    PermissionRule.objects.create(behavior="allow", rule_text="Skill")
    output = chat("--yes", "please use text-stats on some words here")
    assert '[skill] The "text-stats" skill is loading' in output
    assert "[tool] Bash: python3" in output
    # The script counted the skill's arguments ("on some words here"), not the user's text.
    assert "[result] 1 line, 4 words, 18 characters" in output
    hidden = Message.objects.get(kind="skill_prompt").content[0]["text"]
    assert "Base directory for this skill" not in output
    assert hidden.splitlines()[-1] not in output


def test_without_yes_approvals_are_denied_with_a_message(admin_user, settings, tmp_path):
    skill = tmp_path / "skills" / "shouter"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\ndescription: Shouts.\n---\nRun this:\n\n```bash\necho HELLO\n```\n"
    )
    settings.SKILLS_DIRS = [tmp_path / "skills"]
    PermissionRule.objects.create(behavior="allow", rule_text="Skill")
    # A folder skill's own commands run under its install's consent (docs/review.md); an
    # administrator's ask rule still puts them to the person, which the command cannot do.
    PermissionRule.objects.create(behavior="ask", rule_text="Bash(echo *)")
    output = chat("please use shouter now")
    assert "Approvals were denied" in output
    result = Message.objects.filter(kind="tool_result").last().content[0]
    assert result["is_error"] is True and "--yes" in result["content"]


def test_a_slash_command_works(admin_user):
    PermissionRule.objects.create(behavior="allow", rule_text="Skill(release-notes)")
    output = chat("/release-notes fixed login, faster search")
    assert (
        '[skill] The "release-notes" skill is loading (args: fixed login, faster search)' in output
    )
    assert "<command-message>" not in output


def test_it_continues_a_conversation(admin_user):
    first = chat("one")
    conversation_id = re.search(r"conversation id: (\d+)", first).group(1)
    second = chat("--conversation", conversation_id, "two")
    assert f"conversation id: {conversation_id}" in second
    assert "you: one" not in second  # only the new turn is printed


def test_it_refuses_another_users_conversation(admin_user, bob):
    conversation = Conversation.objects.create(owner=bob)
    with pytest.raises(CommandError, match="belongs to another user"):
        chat("--conversation", str(conversation.pk), "hi")


@pytest.mark.parametrize("profile", ["meta-message", "tool-result", "system-prompt"])
def test_the_demo_model_runs_a_script_skill_under_every_profile(admin_user, profile):
    PermissionRule.objects.create(behavior="allow", rule_text="Skill")
    output = chat("--yes", "--profile", profile, "please use text-stats one two three")
    assert '[skill] The "text-stats" skill is loading' in output
    if profile == "meta-message":
        assert "3 words" in output  # only the Skill tool carries arguments
    else:
        runner = "skill_run" if profile == "system-prompt" else "Bash"
        assert f"[tool] {runner}" in output and "stats.py" in output
    conversation = Conversation.objects.get()
    assert conversation.profile == profile
    hidden = list(Message.objects.filter(is_meta=True))
    assert hidden, "the skill body is stored as hidden content in every profile"
    assert "Base directory for this skill" not in output


def test_model_sets_the_conversations_model(admin_user):
    output = chat("--model", "claude-haiku-4-5", "hello there")
    conversation_id = int(re.search(r"conversation id: (\d+)", output).group(1))
    assert Conversation.objects.get(pk=conversation_id).model == "claude-haiku-4-5"
    chat("--conversation", str(conversation_id), "--model", "claude-sonnet-5", "again")
    assert Conversation.objects.get(pk=conversation_id).model == "claude-sonnet-5"


def test_an_unknown_model_is_refused_with_the_offered_ones(admin_user):
    with pytest.raises(CommandError) as caught:
        chat("--model", "claude-sonnet-5-5", "hello")
    message = str(caught.value)
    assert '"claude-sonnet-5-5" is not a model Skillscope knows.' in message
    assert 'Did you mean "claude-sonnet-5"?' in message
    assert message.endswith("Offered models: claude-opus-4-8, claude-sonnet-5, claude-haiku-4-5.")
    assert not Conversation.objects.exists()


def test_a_known_model_that_is_not_offered_is_refused(admin_user, settings):
    settings.ANTHROPIC_MODELS = ["claude-opus-4-8"]
    with pytest.raises(CommandError, match="known model but not offered here; add it to"):
        chat("--model", "claude-fable-5", "hello")


def test_nothing_the_run_started_is_still_writing_when_the_command_returns(admin_user, monkeypatch):
    """The after-work of a run (here: the queue check) is awaited, never cut off mid-write.

    Before, it ran as a detached task the event loop cancelled on exit while its thread still
    held a transaction, and the next write failed with "database table is locked".
    """
    original, finished = pending._take_next, threading.Event()

    def slow(conversation_id):
        # Fault injection, not synchronisation: hold the transaction open longer than usual.
        with transaction.atomic():
            taken = original(conversation_id)
            time.sleep(0.3)
        finished.set()
        return taken

    monkeypatch.setattr(pending, "_take_next", slow)
    output = chat("hello there")
    assert finished.is_set()
    conversation_id = int(re.search(r"conversation id: (\d+)", output).group(1))
    conversation = Conversation.objects.get(pk=conversation_id)
    conversation.model = "claude-sonnet-5"
    conversation.save(update_fields=["model"])  # the write that found the table locked
    chat("--conversation", str(conversation_id), "again")


def test_a_new_conversation_is_titled_after_its_first_answer(admin_user):
    output = chat("plan a picnic for saturday")
    conversation = Conversation.objects.get()
    assert conversation.title == title_from_message("plan a picnic for saturday")
    assert conversation.title != DEFAULT_TITLE and conversation.title_auto
    assert f"title: {conversation.title}" in output


def test_a_message_queued_meanwhile_is_sent_and_answered_before_the_command_exits(admin_user):
    conversation = Conversation.objects.create(owner=admin_user, title="queue")
    # Queued in a browser tab while a run was busy (the queue only holds it until a run ends).
    queued = QueuedMessage.objects.create(
        conversation=conversation, author=admin_user, text="and the second question"
    )
    output = chat("--conversation", str(conversation.pk), "first question")
    queued.refresh_from_db()
    assert queued.status == QueuedMessage.SENT
    assert "you: first question" in output and "you: and the second question" in output
    runs = list(conversation.runs.order_by("pk"))
    assert [r.status for r in runs] == [Run.DONE, Run.DONE]
    assert runs[1].prompt == "and the second question"
    answers = Message.objects.filter(conversation=conversation, role="assistant", kind="text")
    assert answers.count() == 2
