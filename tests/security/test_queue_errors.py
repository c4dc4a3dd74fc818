"""A queued message that could not be sent says why in people's words, never the server's.

The failed message's reason is shown in every tab of the conversation. The refusals meant for
people (a run already going, a sending limit) say what they say; anything else (a database or
channel-layer error, a file the server could not read) is logged and shown as a plain sentence,
so no server path, host or query reaches the browser.
"""

from __future__ import annotations

import pytest

from skills_app.models import Conversation, QueuedMessage, Run
from skills_app.runs import pending
from skills_app.runs.supervisor import RunError, start_run

pytestmark = pytest.mark.django_db(transaction=True)

SERVER_DETAIL = "could not connect to redis://queue.internal:6379 (/srv/skillscope/secrets.env)"


@pytest.fixture
def queued(alice):
    conversation = Conversation.objects.create(owner=alice)
    return QueuedMessage.objects.create(conversation=conversation, author=alice, text="next")


async def _send(queued, error: Exception) -> QueuedMessage:
    async def start(*_args, **_kwargs):
        raise error

    await pending.send_next(queued.conversation_id, start=start)
    return await QueuedMessage.objects.aget(pk=queued.pk)


async def test_an_unexpected_error_is_not_shown_to_people(queued):
    failed = await _send(queued, OSError(SERVER_DETAIL))
    assert failed.status == QueuedMessage.FAILED
    assert "redis" not in failed.error and "/srv/" not in failed.error
    assert "send it again" in failed.error


async def test_a_refusal_meant_for_people_says_what_it_says(queued):
    failed = await _send(queued, RunError("This conversation was deleted."))
    assert failed.error == "This conversation was deleted."


async def test_a_limit_reached_is_checked_where_the_run_is_created_and_says_so(queued, settings):
    settings.RATE_LIMIT_CONCURRENT_RUNS = 0
    await pending.send_next(queued.conversation_id, start=start_run)
    failed = await QueuedMessage.objects.aget(pk=queued.pk)
    assert failed.status == QueuedMessage.FAILED
    assert "answers in progress (the limit is 0)" in failed.error
    assert not await Run.objects.filter(conversation_id=queued.conversation_id).aexists()
