"""MCP prompts in the `/` menu and invoked as the person's turn, and a server's questions asked
mid-call (elicitation), against the toy server (the SDK's MCPServer) run for real on HTTP."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Group
from django.test import Client

from skills_app.core.mcp import ServerSpec, call_tool
from skills_app.core.mcp.elicit import ElicitAnswer, ElicitQuestion, checked_values, form_fields
from skills_app.mcp import definitions, prompts
from skills_app.mcp.transport import http_client
from skills_app.models import AuditEvent, Conversation, UserPolicy
from skills_app.runs import supervisor as runs
from skills_app.runs.errors import RunError
from skills_app.workspaces import workspace_for
from tests.mcp.test_filter import REFERENCE_MARKER, _skills
from tests.mcp.test_mcp import http_server_named, listed_and_approved, place_in
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import rows, run_turn, use_fake_model


@pytest.fixture
def carol(django_user_model):
    """A second reviewer, in no group."""
    return django_user_model.objects.create_user("carol", password="carol-pass-123")


@pytest.fixture(autouse=True)
def _fresh_prompt_listings():
    prompts.forget_prompt_listings()
    yield
    prompts.forget_prompt_listings()


def _menu(user, conversation) -> dict[str, dict[str, str]]:
    client = Client()
    client.force_login(user)
    page = client.get(f"/c/{conversation.pk}/").content.decode()
    opening = '<script id="skills-data" type="application/json">'
    start = page.index(opening) + len(opening)
    return {s["name"]: s for s in json.loads(page[start : page.index("</script>", start)])}


def _user_texts(conversation) -> list[str]:
    return [
        block["text"]
        for row in rows(conversation)
        if row.role == "user" and row.kind == "text"
        for block in row.content
        if block.get("type") == "text"
    ]


async def test_a_servers_question_mid_call_is_declined_and_shown(http_server, tmp_path):
    spec = ServerSpec(name="toy", kind="http", url=http_server.url, http_clients=http_client)
    place = place_in(tmp_path / "ws")
    asked = await call_tool(spec, place, "ask_colour", {})
    # The server got a decline (not an error) and its tool went on.
    assert not asked.is_error and asked.text == "elicitation answer: decline"
    [note] = asked.notes
    assert note.text() == (
        '[The MCP server "toy" asked for input: Which colour should the report use? '
        "(fields: colour). Declined: answering a server's questions in the chat is not "
        "available yet.]"
    )
    secret = await call_tool(spec, place, "ask_password", {})
    assert secret.text == "elicitation answer: decline"
    assert 'its field "password" looks like a secret' in secret.notes[0].text()
    assert "never asks for secrets in a form" in secret.notes[0].text()


async def test_a_servers_question_goes_to_the_person_and_the_server_gets_the_answer(
    http_server, tmp_path
):
    spec = ServerSpec(name="toy", kind="http", url=http_server.url, http_clients=http_client)
    place = place_in(tmp_path / "ws")
    asked: list[ElicitQuestion] = []

    async def teal(question: ElicitQuestion) -> ElicitAnswer:
        asked.append(question)
        return ElicitAnswer("accept", checked_values(question.fields, {"colour": "teal"}))

    outcome = await call_tool(spec, place, "ask_colour", {}, ask=teal)
    assert outcome.text == "elicitation answer: accept, colour teal"
    [question] = asked
    assert question.server == "toy"
    assert question.message == "Which colour should the report use?"
    [colour] = question.fields
    assert (colour.name, colour.kind, colour.required) == ("colour", "string", True)
    assert outcome.notes[0].text() == (
        '[The MCP server "toy" asked for input: Which colour should the report use? '
        "The person accepted and sent their answer.]"
    )

    async def cancel(question: ElicitQuestion) -> ElicitAnswer:
        return ElicitAnswer("cancel", why="nobody answered in time")

    cancelled = await call_tool(spec, place, "ask_colour", {}, ask=cancel)
    assert cancelled.text == "elicitation answer: cancel"
    assert "Cancelled (nobody answered in time)" in cancelled.notes[0].text()
    # A question for a secret is never put to the person: shown declined, with the reason,
    # whatever the ask port would answer.
    asked.clear()
    secret = await call_tool(spec, place, "ask_password", {}, ask=teal)
    assert secret.text == "elicitation answer: decline"
    [refused] = asked
    assert refused.fields == () and "never asks for secrets in a form" in refused.refused
    assert 'its field "password" looks like a secret' in secret.notes[0].text()


def test_answers_are_checked_against_the_requested_schema():
    schema = {
        "type": "object",
        "properties": {
            "size": {"type": "integer", "title": "Size"},
            "tone": {"type": "string", "enum": ["dry", "warm"]},
            "urgent": {"type": "boolean"},
        },
        "required": ["size"],
    }
    fields = form_fields(schema)
    assert fields is not None and fields[1].options == ("dry", "warm")
    assert checked_values(fields, {"size": "3", "tone": "warm", "urgent": "on"}) == {
        "size": 3,
        "tone": "warm",
        "urgent": True,
    }
    with pytest.raises(ValueError, match='"Size" is required'):
        checked_values(fields, {"tone": "dry"})
    with pytest.raises(ValueError, match="must be one of: dry, warm"):
        checked_values(fields, {"size": "1", "tone": "loud"})
    with pytest.raises(ValueError, match="whole number"):
        checked_values(fields, {"size": "many"})
    # A nested field is not a form this chat can show: the question is not asked.
    assert form_fields({"properties": {"where": {"type": "object"}}}) is None


@pytest.mark.django_db(transaction=True)
async def test_a_prompt_is_in_the_menu_of_its_groups_and_becomes_the_persons_turn(
    alice, bob, carol, settings, fake_anthropic, http_server, tmp_path
):
    use_fake_model(settings, fake_anthropic, retries=0)
    settings.RATE_LIMIT_MESSAGES_PER_MINUTE = 1000
    sales = await Group.objects.acreate(name="sales")
    await sync_to_async(alice.groups.add)(sales)
    server = await sync_to_async(http_server_named)(bob, http_server, groups=["sales"])
    conversation = await Conversation.objects.acreate(owner=alice, title="prompts")
    # Nothing is offered before a reviewer approved the server's tools.
    assert "mcp__toy__brief" not in await sync_to_async(_menu)(alice, conversation)
    await listed_and_approved(
        server, place_in(tmp_path / "ws"), carol, group_ids=frozenset({sales.pk})
    )
    await _prompts_reviewed(server, carol, alice, frozenset({sales.pk}))
    menu = await sync_to_async(_menu)(alice, conversation)
    assert menu["mcp__toy__brief"]["hint"] == "topic=… [tone=…]"
    assert menu["mcp__toy__brief"]["description"] == "A short brief about a topic, in a tone."
    listed = prompts.prompt_listing_count
    # A person outside the server's groups sees none of its prompts, nor can invoke one.
    others = await Conversation.objects.acreate(owner=carol, title="not mine")
    assert not [n for n in await sync_to_async(_menu)(carol, others) if n.startswith("mcp__")]
    # A required argument left out is refused before the server is asked, naming it.
    with pytest.raises(RunError, match=r"needs the argument topic\. Write: /mcp__toy__brief"):
        await runs.start_run(conversation.pk, "/mcp__toy__brief tone=dry", user_id=alice.pk)
    fake_anthropic.enqueue(Reply.text("Otters float."))
    run = await run_turn(conversation, '/mcp__toy__brief "sea otters" tone=cheerful', alice)
    assert run.status == "done"
    wanted = "Write a cheerful brief about sea otters, in three sentences."
    assert await sync_to_async(_user_texts)(conversation) == [wanted]
    assert wanted in json.dumps(fake_anthropic.requests[-1]["messages"])
    assert prompts.prompt_listing_count == listed  # the menu's listing served the invocation
    [called] = [e async for e in AuditEvent.objects.filter(action="mcp.called")]
    assert called.target == "mcp prompt toy/brief"
    assert called.detail["arguments"] == {"topic": "sea otters", "tone": "cheerful"}
    assert called.actor_id == alice.pk
    # Not a prompt carol may use: her text goes as she typed it, the server never asked.
    assert await _expand("/mcp__toy__brief topic=x", carol, others) is None
    assert await AuditEvent.objects.filter(action="mcp.called").acount() == 1


@pytest.mark.django_db(transaction=True)
async def test_a_prompt_carrying_hidden_skill_text_is_withheld_from_the_turn(
    alice, bob, carol, settings, http_server, tmp_path
):
    settings.SKILLS_DIRS = _skills(tmp_path)
    conversation = await Conversation.objects.acreate(owner=alice, title="hidden")
    server = await sync_to_async(http_server_named)(bob, http_server, everyone=True)
    await listed_and_approved(server, place_in(workspace_for(conversation.pk).root), carol)
    await _prompts_reviewed(server, carol, alice, frozenset())
    path = tmp_path / "skills" / "secret-notes" / "reference.md"
    turn = await _expand(f"/mcp__toy__quote_file {path}", alice, conversation)
    assert turn is not None and turn.startswith("Consider this text:")
    assert REFERENCE_MARKER not in turn and "withheld" in turn


async def _prompts_reviewed(server, reviewer, user, group_ids):
    """List the server's prompts as the menu does (they wait for review), then approve them."""
    assert await prompts.menu_prompts(user.pk, group_ids) == []
    await sync_to_async(definitions.review)(server, approve=True, reviewer=reviewer)


async def _expand(text, user, conversation):
    from skills_app.policy.access import user_groups
    from skills_app.visibility import mcp_call_preview, outbound

    """`resolve` then `ask`, as a run's prompt turn calls them (None: no prompt invoked)."""
    invocation = await prompts.resolve(
        text, user_id=user.pk, group_ids=await sync_to_async(user_groups)(user.pk)
    )
    if invocation is None:
        return None
    return await prompts.ask(
        invocation,
        user_id=user.pk,
        conversation_id=conversation.pk,
        inbound=lambda given: outbound(conversation.pk, can_inspect=False).text(given),
        preview=lambda command, arguments: mcp_call_preview(conversation.pk, command, arguments),
    )


def _briefs_asked(http_server) -> list[str]:
    """The topics the toy server was asked a brief about (its own record)."""
    path = http_server.folder / "briefs-asked"
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.django_db(transaction=True)
async def test_a_prompt_command_past_the_persons_limits_never_reaches_the_server(
    alice, bob, carol, settings, fake_anthropic, http_server, tmp_path
):
    use_fake_model(settings, fake_anthropic, retries=0)
    settings.RATE_LIMIT_MESSAGES_PER_MINUTE = 1000
    server = await sync_to_async(http_server_named)(bob, http_server, everyone=True)
    await listed_and_approved(server, place_in(tmp_path / "ws"), carol)
    await _prompts_reviewed(server, carol, alice, frozenset())
    conversation = await Conversation.objects.acreate(owner=alice, title="limits")
    # A budget reached: the chat's entrance (within_limits) refuses before the server is asked.
    policy = await UserPolicy.objects.acreate(user=alice, daily_limit_usd=Decimal("0"))
    with pytest.raises(RunError, match="daily spending limit"):
        await runs.start_run(
            conversation.pk,
            "/mcp__toy__brief topic=broke-otters",
            user_id=alice.pk,
            within_limits=1,
        )
    # Locked out (deactivated): the same.
    policy.daily_limit_usd = None
    await policy.asave()
    alice.is_active = False
    await alice.asave()
    with pytest.raises(RunError, match="deactivated"):
        await runs.start_run(
            conversation.pk,
            "/mcp__toy__brief topic=barred-otters",
            user_id=alice.pk,
            within_limits=1,
        )
    alice.is_active = True
    await alice.asave()
    # The MCP calls quota used up: refused too, at every entrance (the command line's included).
    settings.MCP_CALLS_PER_MINUTE = 1
    fake_anthropic.enqueue(Reply.text("Otters float."))
    run = await run_turn(conversation, "/mcp__toy__brief topic=first-otters", alice)
    assert run.status == "done"
    with pytest.raises(RunError, match="quota is used up"):
        await runs.start_run(
            conversation.pk, "/mcp__toy__brief topic=more-otters", user_id=alice.pk
        )
    # Checked on the server's side: only the prompt within the limits was asked for.
    asked = _briefs_asked(http_server)
    assert "first-otters" in asked
    assert not {"broke-otters", "barred-otters", "more-otters"} & set(asked)
    assert await AuditEvent.objects.filter(action="mcp.called").acount() == 1


@pytest.mark.django_db(transaction=True)
async def test_a_prompt_command_refused_by_a_limit_or_its_server_leaves_the_conversation_as_it_was(
    alice, bob, carol, settings, fake_anthropic, http_server, tmp_path, monkeypatch
):
    from skills_app.chat import actions
    from skills_app.models import Message, Run
    from skills_app.policy import limits

    use_fake_model(settings, fake_anthropic, retries=0)
    server = await sync_to_async(http_server_named)(bob, http_server, everyone=True)
    await listed_and_approved(server, place_in(tmp_path / "ws"), carol)
    await _prompts_reviewed(server, carol, alice, frozenset())
    conversation = await Conversation.objects.acreate(owner=alice, title="kept")
    fake_anthropic.enqueue(Reply.text("Hello."))
    assert (await run_turn(conversation, "hello", alice)).status == "done"

    async def state() -> tuple[list[tuple[int, bool]], int]:
        messages = [
            (m.pk, m.to_model) async for m in Message.objects.filter(conversation=conversation)
        ]
        return messages, await Run.objects.filter(conversation=conversation).acount()

    async def send(text: str) -> None:
        await actions.perform(
            "send", {"text": text}, conversation_id=conversation.pk, user_id=alice.pk
        )

    before = await state()
    # Past the messages-per-minute limit: refused in words, the server never asked.
    settings.RATE_LIMIT_MESSAGES_PER_MINUTE = 1
    with pytest.raises(actions.ActionError, match="the limit is 1"):
        await send("/mcp__toy__brief topic=hasty-otters")
    assert "hasty-otters" not in _briefs_asked(http_server)
    assert await state() == before
    # Within the limits, a prompt its server cannot give: said, and the admitted run ends
    # failed with no message (the audit keeps every run); the transcript is as it was.
    settings.RATE_LIMIT_MESSAGES_PER_MINUTE = 1000
    with pytest.raises(actions.ActionError) as refused:
        await send("/mcp__toy__quote_file no/such/file.md")
    messages, count = await state()
    assert (messages, count - 1) == before
    failed = await Run.objects.filter(conversation=conversation).order_by("-pk").afirst()
    assert failed.status == Run.FAILED and failed.error == str(refused.value)
    # One that it gives: the limits were asked once for it, then the server.
    asked: list[int] = []
    real = limits.account_barred
    monkeypatch.setattr(
        limits, "account_barred", lambda user_id: asked.append(user_id) or real(user_id)
    )
    fake_anthropic.enqueue(Reply.text("Otters float."))
    await send("/mcp__toy__brief topic=patient-otters")
    [run] = [r async for r in Run.objects.filter(conversation=conversation).order_by("-pk")[:1]]
    await runs.wait_for_run(run.pk, timeout=30)
    assert asked == [alice.pk]
    assert "patient-otters" in _briefs_asked(http_server)
    assert (await Run.objects.aget(pk=run.pk)).status == "done"
    assert "Write a plain brief about patient-otters" in json.dumps(
        fake_anthropic.requests[-1]["messages"]
    )


@pytest.mark.django_db(transaction=True)
async def test_a_prompt_commands_run_waits_for_a_worker_once_its_turn_is_stored(
    alice, bob, carol, http_server, tmp_path, worker_fake, layer
):
    from skills_app.models import Run
    from tests.support.worker_helpers import running_worker

    server = await sync_to_async(http_server_named)(bob, http_server, everyone=True)
    await listed_and_approved(server, place_in(tmp_path / "ws"), carol)
    await _prompts_reviewed(server, carol, alice, frozenset())
    conversation = await Conversation.objects.acreate(owner=alice, title="worker prompt")
    worker_fake.enqueue(Reply.text("Otters float, workers too."))
    async with running_worker():
        run = await runs.start_run(
            conversation.pk, "/mcp__toy__brief topic=queued-otters", user_id=alice.pk
        )
        # Held by this process while the server was asked, then handed to the queue.
        assert run.status == Run.QUEUED and run.worker == ""
        await runs.wait_for_run(run.pk, timeout=20)
    run = await Run.objects.aget(pk=run.pk)
    assert run.status == Run.DONE and run.worker != ""
    wanted = "Write a plain brief about queued-otters, in three sentences."
    assert await sync_to_async(_user_texts)(conversation) == [wanted]
    assert wanted in json.dumps(worker_fake.requests[-1]["messages"])


@pytest.mark.django_db(transaction=True)
async def test_a_stop_while_the_server_is_asked_ends_the_held_run_and_sends_nothing(
    alice, bob, carol, settings, fake_anthropic, http_server, tmp_path, monkeypatch
):
    import asyncio

    from skills_app.models import Message, Run
    from tests.support.loop_helpers import wait_until

    use_fake_model(settings, fake_anthropic, retries=0)
    settings.RUN_HEARTBEAT_SECONDS = 0.2
    server = await sync_to_async(http_server_named)(bob, http_server, everyone=True)
    await listed_and_approved(server, place_in(tmp_path / "ws"), carol)
    await _prompts_reviewed(server, carol, alice, frozenset())
    conversation = await Conversation.objects.acreate(owner=alice, title="stopped")
    never = asyncio.Event()  # a server that does not answer until the test ends
    real_ask = prompts.ask

    async def slow_ask(*args, **kwargs):
        await never.wait()
        return await real_ask(*args, **kwargs)

    monkeypatch.setattr(prompts, "ask", slow_ask)
    starting = asyncio.create_task(
        runs.start_run(conversation.pk, "/mcp__toy__brief topic=stopped-otters", user_id=alice.pk)
    )
    held = Run.objects.filter(conversation=conversation, status=Run.RUNNING)

    async def is_held() -> bool:
        return await held.aexists()

    await wait_until(is_held, what="the run admitted and held")
    assert await runs.stop_run((await held.aget()).pk)
    with pytest.raises(RunError, match="Stopped before the MCP server gave its prompt"):
        await starting
    run = await Run.objects.aget(conversation=conversation)
    assert run.status == Run.STOPPED and run.finished_at is not None
    assert not await Message.objects.filter(conversation=conversation).aexists()
    assert "stopped-otters" not in _briefs_asked(http_server)
    never.set()
