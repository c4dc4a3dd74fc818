from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient, Client

from skills_app.models import Comparison, PermissionRule, Run
from skills_app.runs import store
from skills_app.runs.factory import workspace_for
from tests.loop_helpers import write_skills

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def demo(settings, tmp_path):
    settings.SKILLS_DIRS = [write_skills(tmp_path / "skills")]
    settings.MODEL_CLIENT = "skills_app.runs.client.instant_demo_client"


def test_it_is_for_staff_only(alice, auditor):
    anonymous = Client().get("/compare/")
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]
    ordinary = Client()
    ordinary.force_login(alice)
    assert ordinary.get("/compare/").status_code == 403
    assert (
        ordinary.post("/compare/start/", {"prompt": "x", "skills": ["greeter"]}).status_code == 403
    )
    staff = Client()
    staff.force_login(auditor)
    page = staff.get("/compare/")
    assert page.status_code == 200
    assert 'value="greeter"' in page.content.decode()


def test_it_refuses_an_empty_prompt_or_unknown_skills(auditor):
    client = Client()
    client.force_login(auditor)
    assert (
        "Write a prompt" in client.post("/compare/start/", {"skills": ["greeter"]}).content.decode()
    )
    response = client.post("/compare/start/", {"prompt": "hi", "skills": ["ghost"]})
    assert response.status_code == 400 and "Unknown skill(s): ghost" in response.content.decode()
    assert not Comparison.objects.exists()


async def test_it_runs_the_prompt_under_every_profile_and_shows_them_side_by_side(auditor):
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill")
    client = AsyncClient()
    await sync_to_async(client.force_login)(auditor)
    response = await client.post(
        "/compare/start/", {"prompt": "please use greeter for Ann", "skills": ["greeter"]}
    )
    assert response.status_code == 302
    comparison = await Comparison.objects.aget()
    conversations = [c async for c in comparison.conversations.all()]
    assert sorted(c.profile for c in conversations) == [
        "meta-message",
        "system-prompt",
        "tool-result",
    ]
    assert all(c.skill_filter == ["greeter"] for c in conversations)
    for _ in range(200):
        if not await Run.objects.filter(status__in=Run.ACTIVE).aexists():
            break
        await asyncio.sleep(0.05)
    assert await Run.objects.filter(status=Run.DONE).acount() == 3
    page = (await client.get(response["Location"])).content.decode()
    for profile in ["meta-message", "tool-result", "system-prompt"]:
        assert f"<code>{profile}</code>" in page
    assert "model call" in page and "Request sizes" in page
    assert 'The "greeter" skill' in page  # the chip the user saw
    assert "GREETER-BODY-MARKER" not in page  # never the hidden body


async def test_as_the_source_design_each_profile_starts_from_its_designs_base_prompt(auditor):
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill")
    client = AsyncClient()
    await sync_to_async(client.force_login)(auditor)
    home = (await client.get("/compare/")).content.decode()
    assert 'value="design"' in home and "as the source design" in home
    response = await client.post(
        "/compare/start/",
        {"prompt": "hello", "skills": ["greeter"], "base_prompt": "design"},
    )
    assert response.status_code == 302
    comparison = await Comparison.objects.aget()
    assert comparison.base_prompt == "design"
    for _ in range(200):
        if not await Run.objects.filter(status__in=Run.ACTIVE).aexists():
            break
        await asyncio.sleep(0.05)
    systems = {}
    async for conversation in comparison.conversations.all():
        assert conversation.base_prompt == "design"
        request = await sync_to_async(store.build_request)(conversation)
        systems[conversation.profile] = (request.system, conversation.pk)
    assert systems["meta-message"][0] == "You are Claude Code, Anthropic's official CLI for Claude."
    tool_result, pk = systems["tool-result"]
    workdir = (await sync_to_async(workspace_for)(pk)).root
    assert tool_result.startswith(f"You are a coding agent at {workdir}.\nUse load_skill")
    assert systems["system-prompt"][0].startswith("Available skills:\n")
    page = (await client.get(response["Location"])).content.decode()
    assert "Base prompt:</strong> as the source design" in page
    assert "for the turn that loaded them" in page  # the state lifetime in force


def test_it_refuses_an_unknown_base_prompt(auditor):
    client = Client()
    client.force_login(auditor)
    response = client.post(
        "/compare/start/", {"prompt": "hi", "skills": ["greeter"], "base_prompt": "mine"}
    )
    assert response.status_code == 400 and "Choose the base prompt" in response.content.decode()


def test_the_page_says_which_state_lifetime_and_substitutions_are_in_force(auditor, settings):
    settings.SKILL_STATE_LIFETIME = "conversation"
    settings.TOOL_RESULT_SUBSTITUTIONS = True
    client = Client()
    client.force_login(auditor)
    page = client.get("/compare/").content.decode()
    assert "for the rest of the conversation" in page
    assert "the design itself keeps them for one turn" in page
    assert "<strong>on</strong>" in page


def test_another_staff_member_cannot_open_my_comparison(auditor, admin_user):
    comparison = Comparison.objects.create(created_by=auditor, prompt="x", skills=[])
    client = Client()
    client.force_login(admin_user)
    assert client.get(f"/compare/{comparison.pk}/").status_code == 404


def test_a_new_conversation_takes_the_chosen_profile(alice):
    client = Client()
    client.force_login(alice)
    client.post("/c/new/", {"profile": "tool-result"})
    assert alice.conversations.get().profile == "tool-result"
    assert client.post("/c/new/", {"profile": "bogus"}).status_code == 400
