"""Skills a deny rule blocks are not offered: not in the "/" menu, not in the model's catalog,
and marked "blocked by a rule" on the Skills page; naming one still says which rule refuses it."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from skills_app.models import Conversation, PermissionRule
from skills_app.runs import supervisor as runs
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import use_fake_model, write_skills

pytestmark = pytest.mark.django_db(transaction=True)

SKILLS = {
    name: f"""\
        ---
        name: {name}
        description: The {name} skill for tests.
        ---
        {name.upper()}-BODY
        """
    for name in ("pdf", "docx", "release-notes")
}


@pytest.fixture(autouse=True)
def skills(settings, tmp_path):
    settings.SKILLS_DIRS = [write_skills(tmp_path / "skills", SKILLS)]
    settings.RATE_LIMIT_MESSAGES_PER_MINUTE = 1000


def _menu(user, conversation) -> list[str]:
    client = Client()
    client.force_login(user)
    page = client.get(f"/c/{conversation.pk}/").content.decode()
    start = page.index('<script id="skills-data" type="application/json">') + len(
        '<script id="skills-data" type="application/json">'
    )
    return [s["name"] for s in json.loads(page[start : page.index("</script>", start)])]


def test_a_denied_skill_is_left_out_of_the_slash_menu(alice):
    conversation = Conversation.objects.create(owner=alice)
    assert "pdf" in _menu(alice, conversation)  # the positive control
    PermissionRule.objects.create(behavior="deny", rule_text="Skill(pdf)")
    menu = _menu(alice, conversation)
    assert "pdf" not in menu and {"docx", "release-notes"} <= set(menu)


@pytest.mark.parametrize(
    ("rule", "extra", "blocked"),
    [
        ("Skill", {}, True),  # every skill
        ("Skill(pdf)", {"enabled": False}, False),
        ("Skill(pdf)", {"skill": "docx"}, False),  # only while docx is active
        ("Skill(pdf secret*)", {}, False),  # only some arguments
        ("Skill(pdf *)", {}, True),  # " *" matches no arguments too
    ],
)
def test_only_a_rule_that_refuses_every_invocation_blocks(alice, rule, extra, blocked):
    conversation = Conversation.objects.create(owner=alice)
    PermissionRule.objects.create(behavior="deny", rule_text=rule, **extra)
    assert ("pdf" not in _menu(alice, conversation)) is blocked


def test_the_skills_page_says_blocked_by_a_rule(alice):
    PermissionRule.objects.create(behavior="deny", rule_text="Skill(pdf)")
    client = Client()
    client.force_login(alice)
    html = client.get("/skills/").content.decode()
    row = html[html.index('data-skill="pdf"') :]
    row = row[: row.index("</tr>")]
    # The catalog says it in words for the person (the rule's syntax is for the audit).
    assert 'data-access="deny"' in row and ">denied for you</span>" in row
    other = html[html.index('data-skill="docx"') :]
    other = other[: other.index("</tr>")]
    assert 'data-access="deny"' not in other and ">denied for you</span>" not in other


async def test_the_models_catalog_leaves_it_out_and_naming_it_says_the_rule(
    settings, fake_anthropic, alice
):
    use_fake_model(settings, fake_anthropic)
    await PermissionRule.objects.acreate(behavior="deny", rule_text="Skill(pdf)")
    conversation = await Conversation.objects.acreate(owner=alice)
    fake_anthropic.enqueue(Reply.text("hello"))
    run = await runs.start_run(conversation.pk, "hi", user_id=alice.pk)
    await runs.wait_for_run(run.pk, timeout=20)
    tools = json.dumps(fake_anthropic.requests[-1]["tools"])
    assert "docx" in tools and "release-notes" in tools
    assert '"pdf"' not in tools and "The pdf skill" not in tools

    run = await runs.start_run(conversation.pk, "/pdf", user_id=alice.pk)
    await runs.wait_for_run(run.pk, timeout=20)
    error = await conversation.messages.filter(kind="error").order_by("-seq").afirst()
    assert error is not None and "Skill(pdf)" in str(error.content), error
