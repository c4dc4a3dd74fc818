from __future__ import annotations

import asyncio
import re

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient, Client

from skills_app.models import Comparison, Conversation, Message, ModelCall, PermissionRule, Run
from skills_app.runs import agent_setup
from skills_app.runs import supervisor as runs
from skills_app.workspaces import workspace_for
from tests.support.fake_anthropic import FakeAnthropic, Reply
from tests.support.loop_helpers import use_fake_model, write_skills

# Only the tests that run code in other threads (async ones) need real transactions.
pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def demo(settings, tmp_path):
    settings.SKILLS_DIRS = [write_skills(tmp_path / "skills")]
    settings.MODEL_CLIENT = "tests.support.loop_helpers.instant_demo_client"


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


@pytest.mark.django_db(transaction=True)
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


@pytest.mark.django_db(transaction=True)
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
        request = await sync_to_async(agent_setup.build_request)(conversation)
        systems[conversation.profile] = (request.system, conversation.pk)
    assert systems["meta-message"][0] == "You are Claude Code, Anthropic's official CLI for Claude."
    tool_result, pk = systems["tool-result"]
    workdir = (await sync_to_async(workspace_for)(pk)).root
    assert tool_result.startswith(f"You are a coding agent at {workdir}.\nUse load_skill")
    assert systems["system-prompt"][0].startswith("\nAvailable skills:\n")  # as printed
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
    assert "loaded state lasts for one turn" in page  # as the source design, whatever the setting
    assert "<strong>on</strong>" in page


def test_another_staff_member_cannot_open_my_comparison(auditor, admin_user):
    comparison = Comparison.objects.create(created_by=auditor, prompt="x", skills=[])
    client = Client()
    client.force_login(admin_user)
    assert client.get(f"/compare/{comparison.pk}/").status_code == 404


def test_a_new_conversation_takes_the_chosen_profile(auditor):
    # The delivery profile is a developer's setting: staff choose it (issue 29).
    client = Client()
    client.force_login(auditor)
    client.post("/c/new/", {"profile": "tool-result"})
    assert auditor.conversations.get().profile == "tool-result"
    assert client.post("/c/new/", {"profile": "bogus"}).status_code == 400


# -- one total per side, a live state that ends ------------------------------------------------


def _columns(html: str) -> list[str]:
    return html.split('<article class="compare-column"')[1:]


@pytest.mark.django_db(transaction=True)
async def test_each_side_has_one_total_equal_to_its_parts_and_stops_saying_running(auditor):
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill")
    client = AsyncClient()
    await sync_to_async(client.force_login)(auditor)
    response = await client.post(
        "/compare/start/", {"prompt": "please use greeter for Ann", "skills": ["greeter"]}
    )
    for _ in range(200):
        if not await Run.objects.filter(status__in=Run.ACTIVE).aexists():
            break
        await asyncio.sleep(0.05)
    page = (await client.get(response["Location"])).content.decode()
    columns = _columns(page)
    assert len(columns) == 3
    for column in columns:
        rows = re.findall(r"<tr(?: class=\"total\")?><td>([^<]+)</td><td>(\d+)</td>", column)
        totals = [int(n) for part, n in rows if part == "total"]
        parts = [int(n) for part, n in rows if part != "total"]
        assert len(totals) == 1, rows  # one total per side, not a second doubled one
        assert totals[0] == sum(parts) > 0
        assert "Running…" not in column and 'data-status="done"' in column
        assert 'class="cache-share"' in column  # the measured share (its own test checks it)
    assert 'hx-trigger="every' not in page  # nothing left to poll


def test_a_finished_tool_call_shows_its_result_not_running(auditor, alice):
    comparison = Comparison.objects.create(created_by=auditor, prompt="p", skills=[])
    conversation = Conversation.objects.create(owner=auditor, title="c", profile="meta-message")
    comparison.conversations.add(conversation)
    run = Run.objects.create(conversation=conversation, status=Run.DONE)
    Message.objects.create(
        conversation=conversation,
        seq=1,
        role="assistant",
        kind="tool_use",
        run=run,
        content=[{"type": "tool_use", "id": "toolu_9", "name": "Bash", "input": {"command": "ls"}}],
    )
    Message.objects.create(
        conversation=conversation,
        seq=2,
        role="user",
        kind="tool_result",
        run=run,
        content=[{"type": "tool_result", "tool_use_id": "toolu_9", "content": "RESULT-OF-LS-3a"}],
    )
    client = Client()
    client.force_login(auditor)
    page = client.get(f"/compare/{comparison.pk}/").content.decode()
    assert "RESULT-OF-LS-3a" in page and "Running…" not in page


def test_the_page_polls_only_while_a_run_is_active(auditor):
    comparison = Comparison.objects.create(created_by=auditor, prompt="p", skills=[])
    conversation = Conversation.objects.create(owner=auditor, title="c", profile="tool-result")
    comparison.conversations.add(conversation)
    run = Run.objects.create(conversation=conversation, status=Run.RUNNING)
    client = Client()
    client.force_login(auditor)
    live = client.get(f"/compare/{comparison.pk}/").content.decode()
    assert 'hx-trigger="every 1s"' in live and "Running…" in live
    Run.objects.filter(pk=run.pk).update(status=Run.FAILED)
    fragment = client.get(f"/compare/{comparison.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert "hx-trigger" not in fragment and "Running…" not in fragment
    assert 'data-status="failed"' in fragment and "Failed" in fragment


def load_greeter_then_answer(request):
    """Load greeter with the profile's loader, then answer."""
    names = [t["name"] for t in request.get("tools", [])]
    last = request["messages"][-1]["content"]
    if any(b.get("type") == "tool_result" for b in last):
        return Reply.text("Hello Ann.")
    for tool, key in (("Skill", "skill"), ("load_skill", "name"), ("skill_load", "skill")):
        if tool in names:
            return Reply.tool_use(tool, {key: "greeter"})
    return Reply.text("no loader")


@pytest.mark.django_db(transaction=True)
async def test_it_shows_the_measured_cache_share_per_profile(settings, auditor):
    with FakeAnthropic(cache_minimum=False) as fake:
        use_fake_model(settings, fake)
        settings.MODEL_CLIENT = "skills_app.runs.client.default_client"
        fake.set_responder(load_greeter_then_answer)
        await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill")
        client = AsyncClient()
        await sync_to_async(client.force_login)(auditor)
        response = await client.post(
            "/compare/start/", {"prompt": "greet Ann", "skills": ["greeter"]}
        )
        for run in [r async for r in Run.objects.all()]:
            await runs.wait_for_run(run.pk, timeout=30)
        page = (await client.get(response["Location"])).content.decode()

    assert "its cache is lost when a skill loads" in page
    shares = {}
    for profile in ["meta-message", "tool-result", "system-prompt"]:
        calls = [
            c
            async for c in ModelCall.objects.filter(conversation__profile=profile).order_by("call")
        ]
        assert len(calls) == 2
        read = sum(c.cache_read_input_tokens for c in calls)
        total = sum(c.input_total for c in calls)
        shares[profile] = calls[1].cache_read_input_tokens / calls[1].input_total
        column = page[page.index(f'id="cache-share-{profile}"') :]
        assert column.startswith(
            f'id="cache-share-{profile}"><strong>{round(read * 100 / total)}%</strong>'
        )
    # The call after the load: appending keeps the prefix cached; the system prompt changing does not.
    assert shares["meta-message"] > shares["system-prompt"]
    assert shares["tool-result"] > shares["system-prompt"]


def test_the_page_says_which_source_each_part_follows_and_what_each_mode_changes(auditor):
    staff = Client()
    staff.force_login(auditor)
    page = staff.get("/compare/").content.decode()
    sources = page.split('id="meta-message-sources"', 1)[1].split("</table>", 1)[0]
    follows = {
        re.sub(r"<[^>]+>", "", part).split(" (")[0]: source
        for part, source in re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td></tr>", sources)
    }
    assert len(follows) == 8
    assert follows["Acknowledgement Launching skill: NAME"] == "today's Claude Code"
    assert follows["Tool input {skill, args}"] == "today's Claude Code"
    assert follows["The tool's description around the list"] == "Skillscope's own words"
    assert follows["Visible status message"] == "the article"
    tool_result = page.split('id="tool-result-modes"', 1)[1].split("</dd>", 1)[0]
    assert "<code>read_file</code>" in tool_result and "max_tokens 8000" in tool_result
    system_prompt = page.split('id="system-prompt-modes"', 1)[1].split("</dd>", 1)[0]
    assert "<code>bash -lc</code>" in system_prompt and "SkillRunInput" in system_prompt
    assert "deny" in page.split('id="design-safety"', 1)[1].split("</p>", 1)[0]


async def _settled() -> None:
    for _ in range(200):
        if not await Run.objects.filter(status__in=Run.ACTIVE).aexists():
            return
        await asyncio.sleep(0.05)


@pytest.mark.django_db(transaction=True)
async def test_a_comparison_past_the_limits_is_refused_in_words_and_leaves_nothing(
    auditor, settings
):
    # Three runs wanted, two left this minute.
    settings.RATE_LIMIT_MESSAGES_PER_MINUTE = 3
    other = await Conversation.objects.acreate(owner=auditor, title="elsewhere")
    await Run.objects.acreate(conversation=other, status=Run.DONE)
    client = AsyncClient()
    await sync_to_async(client.force_login)(auditor)
    response = await client.post(
        "/compare/start/", {"prompt": "how do otters sleep", "skills": ["greeter"]}
    )
    page = response.content.decode()
    assert response.status_code == 429
    assert "the limit is 3" in page and "press Retry" in page
    assert "how do otters sleep" in page  # the prompt stays in the form
    assert not await Comparison.objects.aexists()
    assert await Conversation.objects.acount() == 1
    assert await Run.objects.acount() == 1


@pytest.mark.django_db(transaction=True)
async def test_two_comparisons_at_once_with_room_for_one_start_one_whole(auditor, settings):
    settings.RATE_LIMIT_MESSAGES_PER_MINUTE = 3
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill")
    clients = [AsyncClient(), AsyncClient()]
    for client in clients:
        await sync_to_async(client.force_login)(auditor)
    responses = await asyncio.gather(
        *(c.post("/compare/start/", {"prompt": "hello", "skills": ["greeter"]}) for c in clients)
    )
    await _settled()
    assert sorted(r.status_code for r in responses) == [302, 429]
    comparison = await Comparison.objects.aget()
    assert await comparison.conversations.acount() == 3
    assert await Run.objects.filter(conversation__comparisons=comparison).acount() == 3
    assert await Run.objects.acount() == 3
