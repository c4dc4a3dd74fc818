"""Conversation helpers for the web pages: listing and search, the visible transcript, retry text,
and deletion (which hides a conversation from its owner and keeps every row for the audit)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from skills_app import trail
from skills_app.chat import turns
from skills_app.chat.feedback import feedback_by_answer
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
    rows_with_ids,
)
from skills_app.visibility import outbound

SEARCHABLE_KINDS = ("text", "skill_status", "error", "notice")
# Searchable kinds whose text is shown through the outbound filter (not someone's own words).
FILTERED_KINDS = frozenset({"error", "notice"})
# Rows the chat page shows at first, and each "Load earlier messages" adds: a page stays small
# however long the conversation (all the rows of a long one make a page of megabytes).
PAGE_ROWS = 200


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
    return list(_visible(conversation, can_inspect=can_inspect).order_by("seq"))


def _visible(conversation: Conversation, *, can_inspect: bool) -> QuerySet[Message]:
    rows = conversation.messages.select_related("run", "invocation")
    return rows if can_inspect else rows.filter(is_meta=False)


@dataclass(frozen=True, slots=True)
class TranscriptPage:
    """Consecutive rows a viewer may see, in order, and how many of those rows come before."""

    rows: list[Message]
    earlier: int
    # The newest page (what the chat page opens with) or an earlier one.
    newest: bool = True
    # When the row just before the page was stored (None: no row comes before it).
    after: datetime | None = None

    @property
    def before(self) -> int | None:
        """The seq to ask the previous page for (`?before=`), when there is one."""
        return self.rows[0].seq if self.rows and self.earlier else None

    @property
    def until(self) -> datetime | None:
        """Things asked from this time on belong to a later page (None: the newest has them)."""
        return None if self.newest or not self.rows else self.rows[-1].created_at


def transcript_page(
    conversation: Conversation, *, can_inspect: bool, before: int | None = None
) -> TranscriptPage:
    """The newest `PAGE_ROWS` rows a viewer may see, or the newest of those before seq `before`.

    Pages count the rows this viewer is shown: hidden rows are neither in an ordinary user's
    page nor counted for it.
    """
    rows = _visible(conversation, can_inspect=can_inspect)
    if before is not None:
        rows = rows.filter(seq__lt=before)
    page = list(rows.order_by("-seq")[:PAGE_ROWS])
    page.reverse()
    previous = rows.filter(seq__lt=page[0].seq) if page else rows.none()
    earlier = previous.count()
    after = previous.order_by("-seq").values_list("created_at", flat=True).first()
    return TranscriptPage(page, earlier, newest=before is None, after=after)


# How far past the rows shown a tool call's result is looked for (a call on the last row of a
# page has its result on the next one).
RESULTS_AHEAD = 100


def transcript_context(
    conversation: Conversation, rows: list[Message], *, can_inspect: bool
) -> dict[str, Any]:
    """Facts the partials need beyond one row: tool results, invocation states, delivered skills.

    Read for the tool calls of `rows` only, so a page of a long conversation costs a page.
    """
    calls = {
        str(block.get("id", ""))
        for row in rows
        if row.role == Message.ASSISTANT
        for block in row.content
        if block.get("type") == "tool_use"
    }
    results = _stored_results(rows)
    delivered = _delivered(rows)
    if rows and calls - results.keys() - delivered:
        # Calls whose result (or skill status) row comes after the rows shown.
        ahead = _visible(conversation, can_inspect=can_inspect).filter(
            seq__gt=max(row.seq for row in rows), kind__in=("tool_result", "skill_status")
        )
        later = list(ahead.order_by("seq")[:RESULTS_AHEAD])
        results = {**_stored_results(later), **results}
        delivered |= _delivered(later)
    events = RunEvent.objects.filter(
        conversation=conversation, type="tool.result", data__tool_use_id__in=sorted(calls)
    )
    if not can_inspect:
        events = events.filter(hidden=False)
    for event in events.only("data") if calls else []:
        tool_use_id = event.data.get("tool_use_id", "")
        # Artifacts and decisions live only in the event; the stored block has the full text.
        merged = {**event.data, **results.get(tool_use_id, {})}
        results[tool_use_id] = merged
    invocations = {
        inv.tool_use_id: inv
        for inv in SkillInvocation.objects.filter(conversation=conversation, tool_use_id__in=calls)
    }
    return {
        "results": results,
        "invocations": invocations,
        "delivered": delivered,
        "retry_id": retry_message_id(conversation.pk),
        # The owner's thumbs on the answers shown (only the owner rates a conversation's answers).
        "feedback": feedback_by_answer(conversation.owner_id, rows),
        # Which row of each answer carries its footer (`chat.turns`).
        turns.LAST_SEQ: turns.last_seqs(rows),
        turns.VERSIONS: turns.version_map(conversation.pk),
        # One outbound filter for the whole batch: its index is looked up once.
        "outbound": outbound(conversation.pk, can_inspect=can_inspect),
    }


def _stored_results(rows: list[Message]) -> dict[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row.kind == "tool_result":
            for block in row.content:
                if block.get("type") == "tool_result":
                    results[block.get("tool_use_id", "")] = {
                        "content": result_text(block),
                        "is_error": bool(block.get("is_error")),
                    }
    return results


def _delivered(rows: list[Message]) -> set[str]:
    return {
        row.invocation.tool_use_id
        for row in rows
        if row.kind == "skill_status" and row.invocation is not None and row.invocation.tool_use_id
    }


def retry_message_id(conversation_id: int) -> int | None:
    """The notice row that offers Retry: only the latest failed turn's (`retry_notice`)."""
    # Asked on every page view: the whole history is read only when a notice offering Retry
    # has no message of the person's after it (`retry_notice` then decides).
    latest = (
        Message.objects.filter(conversation_id=conversation_id, to_model=False, meta__retry=True)
        .order_by("-seq")
        .values_list("seq", flat=True)
        .first()
    )
    if latest is None:
        return None
    typed_since = Message.objects.filter(
        conversation_id=conversation_id,
        seq__gt=latest,
        role=Message.USER,
        is_meta=False,
        kind__in=("text", "command"),
    ).order_by("seq")
    for meta in typed_since.values_list("meta", flat=True).iterator():
        if not (meta or {}).get("subagent_result") and not (meta or {}).get("subagent_run"):
            return None  # the person went on: no Retry any more (`typed_by_user`)
    ids, stored = rows_with_ids(conversation_id)
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


def pin_conversation(conversation: Conversation, pinned: bool) -> Conversation:
    """Pin a conversation to the top of its owner's list, or unpin it."""
    conversation.pinned_at = (conversation.pinned_at or timezone.now()) if pinned else None
    # Like a rename, pinning is not activity: the day groups stay as they were.
    Conversation.objects.filter(pk=conversation.pk).update(pinned_at=conversation.pinned_at)
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
    An `mcp__` call's input has the stored MCP secrets masked (the caller filters hidden text).
    """
    secrets = outbound(conversation.pk, can_inspect=True)  # masks secrets, withholds nothing
    rows = conversation.messages.filter(content__icontains=tool_use_id).order_by("seq")
    if not can_inspect:
        rows = rows.filter(is_meta=False)
    found: dict[str, Any] = {}
    for row in rows:
        for block in row.content:
            if block.get("type") == "tool_use" and block.get("id") == tool_use_id:
                shown = secrets.call_input(str(block.get("name", "")), block.get("input") or {})
                found["input"] = json.dumps(shown, indent=2, ensure_ascii=False)
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
