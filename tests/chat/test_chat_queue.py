"""Nothing typed is lost, and edits stay in the audit: messages sent while a run is busy are
queued on the server and sent when it ends; editing the latest message or regenerating the latest
answer marks the old rows replaced (kept, never sent again). Attacks first: another
conversation's ids, a flood of queued messages."""

from __future__ import annotations

import json
import threading

import pytest
from asgiref.sync import sync_to_async

from skills_app.chat import actions
from skills_app.chat.actions import ActionError
from skills_app.core.transcript import EXCLUDED, REPLACED
from skills_app.models import Conversation, Message, QueuedMessage, Run, RunEvent
from skills_app.runs import store
from skills_app.runs import supervisor as runs
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import use_fake_model, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fake(settings, fake_anthropic):
    use_fake_model(settings, fake_anthropic, retries=0)
    settings.RATE_LIMIT_MESSAGES_PER_MINUTE = 1000
    settings.CHAT_MAX_QUEUED = 3
    return fake_anthropic


async def act(conversation, user, action: str, **fields) -> str:
    return await actions.perform(
        action, {"action": action, **fields}, conversation_id=conversation.pk, user_id=user.pk
    )


async def busy_run(fake, conversation, user) -> threading.Event:
    """Start a run whose answer waits until the returned event is set."""
    release, reached = threading.Event(), threading.Event()
    fake.enqueue(Reply.text("first answer", wait_for=release, wait_after_events=3, reached=reached))
    await act(conversation, user, "send", text="first")
    await wait_until(_is_set(reached), what="the model to be asked")
    return release


def _is_set(event: threading.Event):
    async def check() -> bool:
        return event.is_set()

    return check


async def finished_runs(conversation) -> int:
    return await Run.objects.filter(conversation=conversation, status=Run.DONE).acount()


async def test_a_queued_message_cannot_be_cancelled_from_another_conversation(
    fake, conversation, alice, bob
):
    other = await Conversation.objects.acreate(owner=bob)
    theirs = await QueuedMessage.objects.acreate(conversation=other, author=bob, text="bob's")
    with pytest.raises(ActionError, match="not waiting"):
        await act(conversation, alice, "cancel", queued_id=theirs.pk)
    assert (await QueuedMessage.objects.aget(pk=theirs.pk)).status == QueuedMessage.PENDING


async def test_the_queue_of_a_conversation_is_bounded(fake, conversation, alice):
    release = await busy_run(fake, conversation, alice)
    for n in range(3):
        await act(conversation, alice, "send", text=f"waiting {n}")
    with pytest.raises(ActionError, match="the limit is 3"):
        await act(conversation, alice, "send", text="one too many")
    assert await QueuedMessage.objects.filter(conversation=conversation).acount() == 3
    # Leave nothing running: cancel the queue, then let the run end.
    for q in await sync_to_async(list)(QueuedMessage.objects.filter(conversation=conversation)):
        await act(conversation, alice, "cancel", queued_id=q.pk)
    release.set()
    await wait_until(lambda: _none_active(conversation), what="the run to end")


async def test_queueing_and_cancelling_in_a_loop_hits_the_sending_limit(
    settings, fake, conversation, alice
):
    settings.RATE_LIMIT_MESSAGES_PER_MINUTE = 4
    release = await busy_run(fake, conversation, alice)
    with pytest.raises(ActionError, match="queued 4 messages in the last minute"):
        for n in range(5):
            await act(conversation, alice, "send", text=f"spam {n}")
            queued = await QueuedMessage.objects.filter(status="pending").alast()
            await act(conversation, alice, "cancel", queued_id=queued.pk)
    assert await QueuedMessage.objects.acount() == 4
    release.set()
    await wait_until(lambda: _none_active(conversation), what="the run to end")


async def _none_active(conversation) -> bool:
    return not await Run.objects.filter(conversation=conversation, status__in=Run.ACTIVE).aexists()


async def test_a_message_sent_while_busy_waits_and_goes_when_the_run_ends(
    fake, conversation, alice
):
    release = await busy_run(fake, conversation, alice)
    await act(conversation, alice, "send", text="second, typed while busy")
    await act(conversation, alice, "send", text="third, cancelled")
    queued = await sync_to_async(list)(QueuedMessage.objects.filter(conversation=conversation))
    assert [q.text for q in queued] == ["second, typed while busy", "third, cancelled"]
    # Nothing of them is stored as a message yet: the run in progress must not see them.
    assert not await Message.objects.filter(content__icontains="typed while busy").aexists()
    await act(conversation, alice, "cancel", queued_id=queued[1].pk)
    types = [
        e
        async for e in RunEvent.objects.filter(conversation=conversation).values_list(
            "type", flat=True
        )
    ]
    assert types.count("message.queued") == 2 and "queued.gone" in types

    fake.enqueue(Reply.text("second answer"))
    release.set()
    await wait_until(lambda: _runs_done(conversation, 2), what="the queued message's run")
    last = fake.requests[-1]["messages"][-1]["content"][-1]["text"]
    assert last == "second, typed while busy"
    statuses = {
        q.text: q.status async for q in QueuedMessage.objects.filter(conversation=conversation)
    }
    assert statuses == {"second, typed while busy": "sent", "third, cancelled": "cancelled"}
    assert "third, cancelled" not in json.dumps([r["messages"] for r in fake.requests])


async def _titled(conversation, title: str) -> bool:
    return (await Conversation.objects.aget(pk=conversation.pk)).title == title


async def _runs_done(conversation, count: int) -> bool:
    return await finished_runs(conversation) >= count and await _none_active(conversation)


async def test_editing_touches_only_the_persons_messages_of_this_conversation(
    fake, conversation, alice, bob
):
    other = await Conversation.objects.acreate(owner=bob)
    fake.enqueue(Reply.text("bob's answer"), Reply.text("alice's answer"))
    await runs.wait_for_run((await runs.start_run(other.pk, "bob's", user_id=bob.pk)).pk, 30)
    await runs.wait_for_run(
        (await runs.start_run(conversation.pk, "mine", user_id=alice.pk)).pk, 30
    )
    bobs = await Message.objects.aget(conversation=other, role="user")
    with pytest.raises(ActionError, match="cannot be edited"):
        await act(conversation, alice, "edit", message_id=bobs.pk, text="hijack")
    assert not await Message.objects.filter(meta__has_key=EXCLUDED).aexists()


async def test_an_edit_replaces_the_turn_for_the_model_and_keeps_it_for_the_audit(
    fake, conversation, alice
):
    fake.enqueue(Reply.text("answer to the typo"))
    await act(conversation, alice, "send", text="teh first question")
    await wait_until(lambda: _runs_done(conversation, 1), what="the first run")
    first = await Message.objects.aget(conversation=conversation, role="user")

    await wait_until(lambda: _titled(conversation, "teh first question"), what="a title")

    fake.enqueue(Reply.text("answer to the fixed question"))
    await act(conversation, alice, "edit", message_id=first.pk, text="the first question")
    await wait_until(lambda: _runs_done(conversation, 2), what="the edited run")
    # The automatic title follows the edited first message.
    await wait_until(lambda: _titled(conversation, "the first question"), what="a new title")

    sent = json.dumps(fake.requests[-1]["messages"])
    assert "the first question" in sent
    assert "teh first" not in sent and "answer to the typo" not in sent
    old = await sync_to_async(list)(
        Message.objects.filter(conversation=conversation, meta__excluded=REPLACED)
    )
    assert len(old) == 2 and all(m.meta["replaced_by"] == "edit" for m in old)
    assert all(m.meta["replaced_at"] for m in old)
    # A replaced message cannot be edited again; the new one can.
    with pytest.raises(ActionError, match="cannot be edited"):
        await act(conversation, alice, "edit", message_id=first.pk, text="again")


async def test_an_earlier_message_can_be_edited_and_the_later_turns_become_a_replaced_branch(
    fake, conversation, alice, settings, tmp_path
):
    from tests.support.loop_helpers import write_skills

    settings.SKILLS_DIRS = [write_skills(tmp_path / "skills")]
    await sync_to_async(_allow)("Skill(greeter)")
    # Turn 1 loads a skill (hidden text for the model), turn 2 and 3 follow.
    fake.enqueue(Reply.text("greeted"), Reply.text("two"), Reply.text("three"))
    for done, text in enumerate(("/greeter Ada", "second question", "third question"), 1):
        await act(conversation, alice, "send", text=text)
        await wait_until(lambda d=done: _runs_done(conversation, d), what=f"run {done}")
    second = await Message.objects.aget(
        conversation=conversation, kind="text", role="user", content__0__text="second question"
    )
    # A model-made row is not the person's: it cannot be edited.
    answer = await Message.objects.filter(conversation=conversation, role="assistant").afirst()
    with pytest.raises(ActionError, match="cannot be edited"):
        await act(conversation, alice, "edit", message_id=answer.pk, text="rewrite history")

    fake.enqueue(Reply.text("a better second answer"))
    await act(conversation, alice, "edit", message_id=second.pk, text="second question, fixed")
    await wait_until(lambda: _runs_done(conversation, 4), what="the edited run")

    sent = fake.requests[-1]["messages"]
    as_text = json.dumps(sent)
    # The turns before the edit stay as they were (the skill's text included, for the model);
    # the edited message replaces the later ones, which the model never sees again.
    assert "GREETER-BODY-MARKER" in as_text and "greeted" in as_text
    assert "second question, fixed" in as_text
    assert "third question" not in as_text and '"two"' not in as_text
    assert 'second question"' not in as_text
    replaced = [
        m.content[0].get("text", "")
        async for m in Message.objects.filter(
            conversation=conversation, meta__excluded=REPLACED
        ).order_by("seq")
    ]
    assert replaced == ["second question", "two", "third question", "three"]

    # A person without the inspect permission still sees no hidden text after the edit: not on
    # the page, not in what a tab replays.
    from django.test import Client

    from skills_app.chat.fragments import replay_html

    client = Client()
    await sync_to_async(client.force_login)(alice)
    page = (await sync_to_async(client.get)(f"/c/{conversation.pk}/")).content.decode()
    events = await sync_to_async(list)(RunEvent.objects.filter(conversation=conversation))
    replayed = await sync_to_async(replay_html)(conversation.pk, events, can_inspect=False)
    for shown in (page, repr(replayed)):
        assert "GREETER-BODY-MARKER" not in shown and "Base directory for this skill" not in shown
    assert "second question, fixed" in page and page.count("Earlier version, replaced") == 4


def _allow(rule_text: str) -> None:
    from skills_app.models import PermissionRule

    PermissionRule.objects.create(behavior="allow", rule_text=rule_text)


async def test_regenerate_replaces_only_the_answer(fake, conversation, alice):
    fake.enqueue(Reply.text("a weak answer"))
    await act(conversation, alice, "send", text="a question")
    await wait_until(lambda: _runs_done(conversation, 1), what="the first run")
    fake.enqueue(Reply.text("a better answer"))
    await act(conversation, alice, "regenerate")
    await wait_until(lambda: _runs_done(conversation, 2), what="the regenerated run")

    messages = fake.requests[-1]["messages"]
    assert [m["role"] for m in messages] == ["user"]
    assert "weak" not in json.dumps(messages)
    rows = await sync_to_async(store.history)(conversation)
    assert [(r.role, r.meta.get(EXCLUDED)) for r in rows] == [
        ("user", None),
        ("assistant", REPLACED),
        ("assistant", None),
    ]


async def test_regenerate_without_an_answer_says_what_to_do(fake, conversation, alice):
    with pytest.raises(ActionError, match="no answer to regenerate"):
        await act(conversation, alice, "regenerate")


async def _answered_once(fake, conversation, alice) -> list[tuple[int, str, dict]]:
    """One question answered (and titled); the rows as they stand."""
    fake.enqueue(Reply.text("the first answer"))
    await act(conversation, alice, "send", text="the first question")
    await wait_until(lambda: _runs_done(conversation, 1), what="the first run")
    await wait_until(lambda: _titled(conversation, "the first question"), what="a title")
    return await _rows(conversation)


async def _rows(conversation) -> list[tuple[int, str, dict]]:
    return [
        (m.pk, m.role, m.meta)
        async for m in Message.objects.filter(conversation=conversation).order_by("seq")
    ]


@pytest.mark.parametrize("how", ["edit", "regenerate"])
@pytest.mark.parametrize("limit", ["per_minute", "budget"])
async def test_an_edit_or_regeneration_past_a_limit_is_refused_in_words_and_changes_nothing(
    fake, conversation, alice, settings, how, limit
):
    before = await _answered_once(fake, conversation, alice)
    events = await RunEvent.objects.filter(conversation=conversation).acount()
    if limit == "per_minute":
        settings.RATE_LIMIT_MESSAGES_PER_MINUTE = 1
        said = "the limit is 1"
    else:
        from decimal import Decimal

        from skills_app.models import UserPolicy

        await UserPolicy.objects.acreate(user=alice, daily_limit_usd=Decimal("0"))
        said = "daily spending limit"
    [question] = [pk for pk, role, _meta in before if role == "user"]
    fields = {"message_id": question, "text": "the question, fixed"} if how == "edit" else {}
    with pytest.raises(ActionError, match=said) as refused:
        await act(conversation, alice, how, **fields)
    # Retry sends the last message again, not this edit or regeneration: none is offered.
    assert refused.value.retry is False
    assert "Retry" not in str(refused.value)
    # Nothing was replaced, stored, announced or started; the automatic title stays.
    assert await _rows(conversation) == before
    assert await RunEvent.objects.filter(conversation=conversation).acount() == events
    assert await Run.objects.filter(conversation=conversation).acount() == 1
    assert await _titled(conversation, "the first question")
