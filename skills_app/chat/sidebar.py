"""The chat page's sidebar: the person's pinned conversations, then the rest grouped by day."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date

from django.db.models import Q
from django.utils import timezone

from skills_app.chat.conversations import search_conversations
from skills_app.models import Conversation

PINNED = "Pinned"
GROUPS = ("Today", "Yesterday", "Previous 7 days", "Older")
# The sidebar is for finding recent work; the list page (with search) has everything.
SIDEBAR_LIMIT = 100


@dataclass(slots=True)
class Group:
    label: str
    conversations: list[Conversation] = field(default_factory=list)


def day_group(day: date, today: date) -> str:
    """Which group a conversation last active on `day` belongs to, seen on `today`."""
    age = (today - day).days
    if age <= 0:
        return GROUPS[0]
    if age == 1:
        return GROUPS[1]
    if age <= 7:
        return GROUPS[2]
    return GROUPS[3]


def grouped(conversations: Iterable[Conversation], today: date) -> list[Group]:
    """Non-empty groups in GROUPS order, each newest first (the order given)."""
    groups = {label: Group(label) for label in GROUPS}
    for c in conversations:
        day = timezone.localtime(c.updated_at).date()
        groups[day_group(day, today)].conversations.append(c)
    return [g for g in groups.values() if g.conversations]


def sidebar_context(
    user_id: int, *, query: str = "", current: int | None = None, can_inspect: bool = False
) -> dict[str, object]:
    """What `_sidebar.html` needs: the groups, the query and the open conversation's id."""
    # A conversation nothing was sent in yet is listed only while it is open (like a draft).
    started = Q(last_event_seq__gt=0) | Q(pk=current or 0)
    found = search_conversations(user_id, query, can_inspect=can_inspect).filter(started)
    # Pinned ones first, the latest pinned on top, whatever their last activity.
    pinned = list(found.filter(pinned_at__isnull=False).order_by("-pinned_at", "-pk"))
    found = found.filter(pinned_at__isnull=True)[:SIDEBAR_LIMIT]
    groups = grouped(found, timezone.localdate())
    if pinned:
        groups.insert(0, Group(PINNED, pinned))
    return {
        "groups": groups,
        "q": query,
        "current_id": current,
        "truncated": len(found) >= SIDEBAR_LIMIT,
    }
