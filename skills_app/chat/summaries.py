"""Starting a new conversation that carries a summary of an old one (when the old one is full).

The summary is one model call (`core.summary`), stored as a ModelCall of the old conversation
(purpose "summary", its request captured) so its cost is counted like any other; the new
conversation starts with the summary as its first message and keeps the old one's settings.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from skills_app.core.admission import CallRefused
from skills_app.core.llm import ModelClient, ModelError, ModelRequest
from skills_app.core.summary import summarise, summary_request
from skills_app.core.transcript import StoredMessage
from skills_app.models import Conversation, ModelCall
from skills_app.policy.access import policy_for
from skills_app.policy.limits import LimitReached, check_send
from skills_app.runs import store
from skills_app.runs.client import model_client
from skills_app.runs.model_calls import CallRow, metered
from skills_app.runs.spending import Spending

SUMMARY_INTRO = (
    'This conversation continues "{title}". What happened there, summarised by the model:'
)


class SummaryError(Exception):
    """No summary could be made; the message says why and what to do."""


def check_summary_limit(user_id: int) -> None:
    """The sending limits, with summaries counted as messages (each is a paid model call)."""
    check_send(user_id)  # the budget too: a summary is a paid model call
    recent = ModelCall.objects.filter(
        conversation__owner_id=user_id,
        purpose=ModelCall.SUMMARY,
        started_at__gte=timezone.now() - timedelta(minutes=1),
    ).count()
    limit = settings.RATE_LIMIT_MESSAGES_PER_MINUTE
    if recent >= limit:
        raise LimitReached(
            f"You asked for {recent} summaries in the last minute (the limit is {limit}). "
            "Wait a moment and try again."
        )


def _seed(old: Conversation, text: str) -> Conversation:
    with transaction.atomic():
        new = Conversation.objects.create(
            owner_id=old.owner_id,
            title=f"Continued: {old.title}"[:200],
            profile=old.profile,
            model=old.model,
            thinking=old.thinking,
            effort=old.effort,
            skill_filter=old.skill_filter,
        )
        seed = StoredMessage.text(
            "user",
            SUMMARY_INTRO.format(title=old.title) + "\n\n" + text,
            meta={"summary_of": old.pk},
        )
        store.append_message(new.pk, seed)
    return new


async def continue_with_summary(
    old: Conversation, *, client: ModelClient | None = None
) -> Conversation:
    """Summarise `old` with the model and start a new conversation from the summary."""
    client = client or model_client()
    rows = await sync_to_async(store.history)(old)
    request = summary_request(rows, model=old.model or client.model, title=old.title)
    try:
        text = await recorded_call(old.pk, client, request, purpose=ModelCall.SUMMARY)
    except CallRefused as refused:
        raise SummaryError(refused.message) from None
    except ModelError as exc:
        raise SummaryError(exc.message) from exc
    return await sync_to_async(_seed)(old, text)


async def recorded_call(
    conversation_id: int, client: ModelClient, request: ModelRequest, *, purpose: str
) -> str:
    """One model call outside a run (a summary, a title), metered as every call is
    (`runs.model_calls`): recorded with its usage and cost.

    The answer's text; a ModelError when the call fails (recorded as the call's failure) or
    its answer holds no text (an answer, recorded with its cost); CallRefused (before anything is
    sent) when the owner's policy or budget refuses it.
    """
    owner_id = (
        await Conversation.objects.filter(pk=conversation_id)
        .values_list("owner_id", flat=True)
        .aget()
    )
    policy = await sync_to_async(policy_for)(owner_id)
    # The title model is the operator's choice (CHAT_TITLE_MODEL): paid from the owner's budget,
    # whatever models their groups pick from.
    spending = Spending(
        policy, purpose, is_demo=client.is_demo, check_model=purpose != ModelCall.TITLE
    )
    row = CallRow(conversation_id, None, 1, from_rows=False, purpose=purpose)
    events = metered(
        request, client.stream(request), spending=spending, row=row, is_demo=client.is_demo
    )
    try:
        text, _final = await summarise(events)
    finally:
        await asyncio.shield(spending.close())
    return text
