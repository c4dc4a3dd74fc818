"""Titling a conversation after its first answer (`core.titles`), and telling every tab.

Titles are shown to ordinary users, so they are built only from visible text: the person's
first message (their own words) and the first answer's prose passed through the outbound filter,
and the title itself passes it again. A conversation the person renamed keeps its name: the
title is written only while it is still the default, in one conditional update.
"""

from __future__ import annotations

import logging

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import QuerySet

from skills_app.chat.summaries import recorded_call
from skills_app.core.admission import CallRefused
from skills_app.core.events import ConversationTitled
from skills_app.core.llm import ModelClient, ModelError
from skills_app.core.skilltool import parse_slash_command
from skills_app.core.titles import (
    DEFAULT_TITLE,
    clean_title,
    command_title,
    distinct_title,
    title_from_message,
    title_request,
)
from skills_app.core.transcript import REPLACED
from skills_app.models import Conversation, Message, ModelCall, RunEvent
from skills_app.runs import agent_setup, eventlog
from skills_app.runs.broadcast import broadcast_events
from skills_app.runs.client import model_client
from skills_app.visibility import outbound

logger = logging.getLogger(__name__)
User = get_user_model()


def _first_exchange(conversation_id: int) -> tuple[str, str, str] | None:
    """(first message, first answer, its title in words if it is a slash command) as the person
    saw them; None if untitled is not the case."""
    if not Conversation.objects.filter(pk=conversation_id, title=DEFAULT_TITLE).exists():
        return None
    visible = Message.objects.filter(conversation_id=conversation_id, is_meta=False)
    first = _first_kept(
        visible.filter(role=Message.USER, kind__in=("text", "command")).exclude(
            meta__has_key="summary_of"
        )
    )
    answer = _first_kept(visible.filter(role=Message.ASSISTANT, kind="text"))
    if first is None or answer is None:
        return None
    texts = [
        "\n".join(b.get("text", "") for b in row.content if b.get("type") == "text")
        for row in (first, answer)
    ]
    command = ""
    if first.kind == "command":
        skills = agent_setup.skills_for_conversation(first.conversation)
        parsed = parse_slash_command(texts[0], lambda name: skills.get(name) is not None)
        if parsed is not None:
            command = command_title(parsed.names, parsed.args)
    return texts[0], outbound(conversation_id, can_inspect=False).text(texts[1]), command


def _first_kept(rows: QuerySet[Message]) -> Message | None:
    """The earliest row an edit or a regeneration did not replace (looked at in Python: a JSON
    key lookup in exclude() drops the rows that lack the key on some databases)."""
    for row in rows.order_by("seq")[:50]:
        if (row.meta or {}).get("excluded") != REPLACED:
            return row
    return None


def _store_title(conversation_id: int, title: str, fallback: str) -> list[RunEvent]:
    if outbound(conversation_id, can_inspect=False).text(title) != title:
        # The model's title quotes hidden text: the person's own words name it instead.
        title = fallback
    # Distinct within the owner's list: three "Hello! What can you do?" read as one otherwise.
    # In a transaction with the owner's row locked, so two titles made at once differ too.
    with transaction.atomic():
        owner_id = (
            Conversation.objects.filter(pk=conversation_id)
            .values_list("owner_id", flat=True)
            .first()
        )
        if owner_id is None:
            return []
        User.objects.select_for_update().filter(pk=owner_id).first()
        taken = set(
            Conversation.objects.owned_by(owner_id)
            .filter(title__startswith=title)
            .exclude(pk=conversation_id)
            .values_list("title", flat=True)
        )
        title = distinct_title(title, taken)
        # update(): a title is not activity (the list order stays); only while still the default.
        changed = Conversation.objects.filter(pk=conversation_id, title=DEFAULT_TITLE).update(
            title=title, title_auto=True
        )
    if not changed:
        return []
    return [eventlog.append_event(conversation_id, ConversationTitled(title=title))]


def forget_auto_title(conversation_id: int, edited_message_id: int | None) -> None:
    """An edit of the first message: an automatic title is made again after the new answer."""
    first = (
        Message.objects.filter(
            conversation_id=conversation_id,
            role=Message.USER,
            is_meta=False,
            kind__in=("text", "command"),
        )
        .order_by("seq")
        .values_list("pk", flat=True)
        .first()
    )
    if edited_message_id is not None and first == edited_message_id:
        Conversation.objects.filter(pk=conversation_id, title_auto=True).update(
            title=DEFAULT_TITLE, title_auto=False
        )


async def title_after_answer(conversation_id: int) -> None:
    """Give a conversation still called "New conversation" a title, once it has an answer."""
    exchange = await sync_to_async(_first_exchange)(conversation_id)
    if exchange is None:
        return
    first, answer, command = exchange
    # A slash command is named in words (the skill and the gist of its arguments), not as typed.
    fallback = title = command or title_from_message(first)
    client = model_client()
    if settings.CHAT_TITLE_MODEL and not client.is_demo:
        title = await _model_title(conversation_id, client, first, answer) or fallback
    events = await sync_to_async(_store_title)(conversation_id, title, fallback)
    await broadcast_events(events)


async def _model_title(conversation_id: int, client: ModelClient, first: str, answer: str) -> str:
    request = title_request(first, answer, model=settings.CHAT_TITLE_MODEL)
    try:
        text = await recorded_call(conversation_id, client, request, purpose=ModelCall.TITLE)
    except CallRefused as refused:
        # Over budget, or the title model is not offered to the owner: their own words name it.
        logger.info("no title from the model for conversation %s: %s", conversation_id, refused)
        return ""
    except ModelError as exc:
        logger.info("no title from the model for conversation %s: %s", conversation_id, exc)
        return ""
    return clean_title(text)
