"""Conversation helpers for the web pages: listing and search, the visible transcript, retry text,
and deletion (which hides a conversation from its owner and keeps every row for the audit)."""

from __future__ import annotations

import json
from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from skills_app.audit import trail
from skills_app.core.transcript import parse_status_message, result_text, retry_notice, text_of
from skills_app.models import (
    Approval,
    AuditEvent,
    Comparison,
    Conversation,
    Message,
    Run,
    RunEvent,
    SkillInvocation,
)
from skills_app.runs import store
from skills_app.visibility import outbound

SEARCHABLE_KINDS = ("text", "skill_status", "error", "notice")
# Searchable kinds whose text is shown through the outbound filter (not someone's own words).
FILTERED_KINDS = frozenset({"error", "notice"})


def _visible_text(row: Message) -> str:
    return text_of(row.content)


def search_conversations(
    owner_id: int, query: str = "", *, can_inspect: bool = False
) -> QuerySet[Conversation]:
    """The owner's conversations, newest activity first, matching `query` in title or visible text."""
    # The runs of the person's own delivery-profile comparisons are test traffic, on the
    # comparison's page: not in the list.
    compared = Comparison.conversations.through.objects.filter(comparison__created_by_id=owner_id)
    conversations = (
        Conversation.objects.owned_by(owner_id)
        .exclude(pk__in=compared.values("conversation_id"))
        .order_by("-updated_at", "-pk")
    )
    query = query.strip()
    if not query:
        return conversations
    # JSON text is stored with \u escapes for non-ASCII, so look for both spellings.
    escaped = json.dumps(query)[1:-1]
    candidates = Message.objects.filter(
        conversation__owner_id=owner_id, is_meta=False, kind__in=SEARCHABLE_KINDS
    ).filter(Q(content__icontains=query) | Q(content__icontains=escaped))
    # The JSON match also hits keys and other blocks; confirm against the text as it is shown
    # (an error row through the outbound filter: no oracle for hidden text).
    needle = query.casefold()
    filters: dict[int, Any] = {}
    matching_ids = set()
    for row in candidates.only("conversation_id", "content", "kind", "role"):
        text = _visible_text(row)
        if row.kind in FILTERED_KINDS:
            out = filters.setdefault(
                row.conversation_id, outbound(row.conversation_id, can_inspect=can_inspect)
            )
            text = out.text(text)
        if needle in text.casefold():
            matching_ids.add(row.conversation_id)
    return conversations.filter(Q(title__icontains=query) | Q(pk__in=matching_ids))


def visible_messages(conversation: Conversation, *, can_inspect: bool) -> list[Message]:
    """The rows a viewer may see, in order; hidden rows only for inspectors."""
    rows = conversation.messages.select_related("run", "invocation").order_by("seq")
    if not can_inspect:
        rows = rows.filter(is_meta=False)
    return list(rows)


def transcript_context(
    conversation: Conversation, rows: list[Message], *, can_inspect: bool
) -> dict[str, Any]:
    """Facts the partials need beyond one row: tool results, invocation states, delivered skills."""
    results: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row.kind == "tool_result":
            for block in row.content:
                if block.get("type") == "tool_result":
                    results[block.get("tool_use_id", "")] = {
                        "content": result_text(block),
                        "is_error": bool(block.get("is_error")),
                    }
    events = RunEvent.objects.filter(conversation=conversation, type="tool.result")
    if not can_inspect:
        events = events.filter(hidden=False)
    for event in events.only("data"):
        tool_use_id = event.data.get("tool_use_id", "")
        # Artifacts and decisions live only in the event; the stored block has the full text.
        merged = {**event.data, **results.get(tool_use_id, {})}
        results[tool_use_id] = merged
    invocations = {
        inv.tool_use_id: inv
        for inv in SkillInvocation.objects.filter(conversation=conversation).exclude(tool_use_id="")
    }
    delivered = {
        row.invocation.tool_use_id
        for row in rows
        if row.kind == "skill_status" and row.invocation is not None and row.invocation.tool_use_id
    }
    return {
        "results": results,
        "invocations": invocations,
        "delivered": delivered,
        "retry_id": retry_message_id(conversation.pk),
        # One outbound filter for the whole batch: its index is looked up once.
        "outbound": outbound(conversation.pk, can_inspect=can_inspect),
    }


def retry_message_id(conversation_id: int) -> int | None:
    """The notice row that offers Retry: only the latest failed turn's (`retry_notice`)."""
    ids, stored = store.rows_with_ids(conversation_id)
    index = retry_notice(stored)
    return ids[index] if index is not None else None


def active_run(conversation_id: int) -> Run | None:
    return Run.objects.filter(conversation_id=conversation_id, status__in=Run.ACTIVE).last()


def last_user_text(conversation_id: int) -> str | None:
    """What the user last sent (a slash command rebuilt from its status row), for Retry."""
    rows = Message.objects.filter(
        conversation_id=conversation_id,
        role="user",
        is_meta=False,
        kind__in=("text", "command", "skill_status"),
    ).order_by("-seq")
    for row in rows[:50]:
        text = _visible_text(row)
        if row.kind in ("text", "command") and text.strip():
            return text
        if row.kind == "skill_status" and row.invocation_id:
            invocation = row.invocation
            if invocation is not None and invocation.caller == SkillInvocation.USER:
                status = parse_status_message(text)
                if status:
                    return f"/{status['name']} {status['args']}".rstrip()
    return None


def empty_or_new(user: Any, profile: str | None, *, model: str = "") -> Conversation:
    """The person's newest conversation nothing was sent in (still untitled), or a new one.

    New reuses it, so clicking New again and again leaves no trail of empty conversations.
    `profile` (None: keep the found one's, or the default) and `model` (the person's default)
    apply while nothing was sent.
    """
    from skills_app.core.titles import DEFAULT_TITLE

    # Two clicks at once may make two: harmless, and no lock on a join PostgreSQL would refuse.
    empty = (
        Conversation.objects.owned_by(user)
        .filter(last_event_seq=0, title=DEFAULT_TITLE)
        .exclude(pk__in=Message.objects.values("conversation_id"))
        .order_by("-pk")
        .first()
    )
    if empty is None:
        return Conversation.objects.create(
            owner=user, model=model, **({"profile": profile} if profile else {})
        )
    # Nothing was sent in it: it takes what a new one would have.
    changes = {"model": model, **({"profile": profile} if profile else {})}
    if any(getattr(empty, field) != value for field, value in changes.items()):
        Conversation.objects.filter(pk=empty.pk).update(**changes)
        for field, value in changes.items():
            setattr(empty, field, value)
    return empty


def rename_conversation(conversation: Conversation, title: str) -> Conversation:
    """Give a conversation a new title (trimmed, never empty)."""
    conversation.title = " ".join(title.split())[:200] or "New conversation"
    # update() leaves updated_at alone: renaming is not activity and must not reorder the list.
    Conversation.objects.filter(pk=conversation.pk).update(
        title=conversation.title, title_auto=False
    )
    return conversation


def delete_conversation(conversation: Conversation, user: Any) -> list[int]:
    """Hide a conversation from its owner; nothing is removed. Returns the runs still to stop.

    Pending approvals are cancelled (nobody can answer them any more) and the deletion is
    recorded in the audit trail.
    """
    now = timezone.now()
    with transaction.atomic():
        # update(): deleting is not activity, so updated_at (and the retention clock) stays.
        hidden = Conversation.objects.filter(pk=conversation.pk, deleted_at__isnull=True).update(
            deleted_at=now, deleted_by=user
        )
        if not hidden:
            return []
        Approval.objects.filter(conversation=conversation, status=Approval.PENDING).update(
            status=Approval.CANCELLED, answered_at=now
        )
        trail.record(
            AuditEvent.CONVERSATION_DELETED,
            actor=user,
            target=f"conversation #{conversation.pk}",
            conversation_id=conversation.pk,
            title=conversation.title,
            owner=conversation.owner.get_username(),
        )
    conversation.deleted_at, conversation.deleted_by = now, user
    return list(
        Run.objects.filter(conversation=conversation, status__in=Run.ACTIVE).values_list(
            "pk", flat=True
        )
    )


def tool_texts(
    conversation: Conversation, tool_use_id: str, *, can_inspect: bool
) -> dict[str, Any]:
    """The whole stored input, result and file list of one tool call, or {} when there is none.

    Hidden rows only for inspectors (the tool-result profile delivers a body as a tool result).
    """
    rows = conversation.messages.filter(content__icontains=tool_use_id).order_by("seq")
    if not can_inspect:
        rows = rows.filter(is_meta=False)
    found: dict[str, Any] = {}
    for row in rows:
        for block in row.content:
            if block.get("type") == "tool_use" and block.get("id") == tool_use_id:
                found["input"] = json.dumps(block.get("input") or {}, indent=2, ensure_ascii=False)
            elif block.get("type") == "tool_result" and block.get("tool_use_id") == tool_use_id:
                found["result"] = result_text(block)
    if "input" not in found:
        return {}
    events = RunEvent.objects.filter(
        conversation=conversation, type="tool.result", data__tool_use_id=tool_use_id
    )
    if not can_inspect:
        events = events.filter(hidden=False)
    event = events.only("data").first()
    if event is not None:
        found["files"] = "\n".join(
            p for p in event.data.get("artifacts") or [] if isinstance(p, str)
        )
    return found
