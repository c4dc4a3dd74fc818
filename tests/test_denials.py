"""Refusals in plain words (issue 29): a person sees what an administrator's rule does not allow,
with the administrator's note, never the rule syntax the audit keeps."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from skills_app.chat.denials import plain
from skills_app.models import Conversation, PermissionRule, SkillInvocation
from tests.fake_anthropic import Reply
from tests.loop_helpers import run_turn, use_fake_model, write_skills

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_admin_deny_rule_is_said_in_words_with_its_note():
    rule = PermissionRule.objects.create(
        behavior="deny", rule_text="Skill(greeter)", note="Greetings go through the front desk."
    )
    said = plain(
        f'Permission to use the skill "greeter" was denied: deny rule "Skill(greeter)" (admin #{rule.pk})'
    )
    assert said == (
        'Permission to use the skill "greeter" was denied: an administrator\'s rule does not '
        'allow the "greeter" skill. The administrator\'s note: "Greetings go through the front desk."'
    )
    bash = PermissionRule.objects.create(behavior="deny", rule_text="Bash(rm *)", skill="cleaner")
    assert plain(
        f'Permission denied: deny rule "Bash(rm *)" (admin #{bash.pk}, skill "cleaner" only)'
    ) == (
        "Permission denied: an administrator's rule does not allow Bash(rm *) while the "
        '"cleaner" skill is in use'
    )
    # Text that names no admin deny rule is left alone.
    assert plain("approved once by alice") == "approved once by alice"


async def test_a_denied_slash_command_shows_words_and_the_note_in_the_chat(
    settings, fake_anthropic, tmp_path, alice
):
    use_fake_model(settings, fake_anthropic)
    settings.SKILLS_DIRS = [write_skills(tmp_path / "skills")]
    rule = await PermissionRule.objects.acreate(
        behavior="deny", rule_text="Skill(greeter)", note="Ask the front desk instead."
    )
    conversation = await Conversation.objects.acreate(owner=alice)
    fake_anthropic.enqueue(Reply.text("unused"))
    await run_turn(conversation, "/greeter Ann", alice)
    invocation = await SkillInvocation.objects.aget(conversation=conversation)
    assert invocation.decision == "denied"
    assert f"(admin #{rule.pk})" in invocation.error  # the audit keeps the exact rule

    client = Client()
    await sync_to_async(client.force_login)(alice)
    page = (await sync_to_async(client.get)(f"/c/{conversation.pk}/")).content.decode()
    assert "an administrator&#x27;s rule does not allow the &quot;greeter&quot; skill" in page
    assert "Ask the front desk instead." in page
    assert "(admin #" not in page and 'deny rule "' not in page
