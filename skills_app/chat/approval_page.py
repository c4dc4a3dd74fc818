"""Answered approvals stay in the transcript: the chat page puts each where it was asked.

An approval is asked while its run waits between two stored rows, so it belongs before the
first row stored after it, on the page of the conversation that row is on. Pending ones stay at
the end, where the live prompt appears.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from skills_app.chat.fragments import approvals_page_html, page_html
from skills_app.models import Approval, Message


def answered_approvals(
    conversation_id: int, *, after: datetime | None = None, until: datetime | None = None
) -> list[Approval]:
    """The answered approvals of the conversation asked from `after` and before `until`, oldest
    first (None: no bound)."""
    approvals = Approval.objects.filter(conversation_id=conversation_id).exclude(
        status=Approval.PENDING
    )
    if after is not None:
        approvals = approvals.filter(created_at__gte=after)
    if until is not None:
        approvals = approvals.filter(created_at__lt=until)
    return list(approvals.select_related("answered_by").order_by("created_at", "pk"))


def transcript_html(
    conversation_id: int,
    rows: Sequence[Message],
    ctx: dict[str, Any],
    *,
    can_inspect: bool,
    after: datetime | None = None,
    until: datetime | None = None,
) -> list[str]:
    """The page's transcript (`fragments.page_html`) with the answered approvals in place.

    A page of a long conversation takes the approvals asked between the row before it (`after`)
    and its last row (`until`; None for the newest page, which also ends with the later ones).
    """
    approvals = answered_approvals(conversation_id, after=after, until=until)
    if not approvals:
        return page_html(conversation_id, rows, ctx, can_inspect=can_inspect)
    cards = approvals_page_html(conversation_id, approvals, can_inspect=can_inspect)
    waiting = list(zip(approvals, cards, strict=True))
    merged: list[str] = []
    for row in rows:
        while waiting and waiting[0][0].created_at < row.created_at:
            merged.append(waiting.pop(0)[1])
        merged.extend(page_html(conversation_id, [row], ctx, can_inspect=can_inspect))
    merged.extend(card for _, card in waiting)
    return merged
