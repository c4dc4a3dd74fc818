"""Answered approvals stay in the transcript: the chat page puts each where it was asked.

An approval is asked while its run waits between two stored rows, so it belongs before the
first row stored after it. Pending ones stay at the end, where the live prompt appears.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from skills_app.chat.fragments import approvals_page_html, page_html
from skills_app.models import Approval, Message


def answered_approvals(conversation_id: int) -> list[Approval]:
    """Every answered approval of the conversation, oldest first."""
    return list(
        Approval.objects.filter(conversation_id=conversation_id)
        .exclude(status=Approval.PENDING)
        .select_related("answered_by")
        .order_by("created_at", "pk")
    )


def transcript_html(
    conversation_id: int, rows: Sequence[Message], ctx: dict[str, Any], *, can_inspect: bool
) -> list[str]:
    """The page's transcript (`fragments.page_html`) with the answered approvals in place."""
    approvals = answered_approvals(conversation_id)
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
