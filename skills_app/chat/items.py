"""What the chat shows, as items that render themselves per visibility class, and the filter.

`user_html` is the one place hidden items are dropped from what a person without the inspect
permission receives (`is_meta` rows, hidden events), and every item left renders for ordinary
users: the rendering functions pass the text an item shows (tool inputs and results, approval
prompts, chip errors; never the model's own prose) through `visibility.outbound`, which withholds
every verbatim span of the conversation's hidden text.

Every fragment is an out-of-band swap for htmx's websocket extension. New elements go to the end
of `#transcript` (the client replaces an element whose id it already has, so a replay never
duplicates); updates of elements the tab may or may not have (a tool result, a skill chip, an
answered approval) replace them and are dropped otherwise; the run's controls and the live area
are replaced whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from django.template.loader import render_to_string
from django.utils.html import escape

from skills_app.chat import rendering, tool_cards
from skills_app.models import Approval, Message, QueuedMessage
from skills_app.visibility import outbound

# Swap styles of a part: a new element, an update of one the tab may have, a whole replacement.
APPEND, UPDATE, REPLACE = "append", "update", "replace"


class Item(Protocol):
    """Something shown in the chat: renders itself for one visibility class."""

    @property
    def hidden(self) -> bool: ...

    def render(self, *, can_inspect: bool) -> str: ...


@dataclass(frozen=True, slots=True)
class Part:
    item: Item
    swap: str = APPEND
    # The id of an element this one takes the place of (a skill's chip when its status row lands).
    replaces: str = ""


@dataclass(frozen=True, slots=True)
class MessageItem:
    row: Message
    ctx: dict[str, Any] | None = None

    @property
    def hidden(self) -> bool:
        return bool(self.row.is_meta)

    def render(self, *, can_inspect: bool) -> str:
        return rendering.render_message(self.row, can_inspect=can_inspect, ctx=self.ctx)


@dataclass(frozen=True, slots=True)
class ToolResultItem:
    conversation_id: int
    tool_use_id: str
    data: dict[str, Any]
    hidden: bool = False

    def render(self, *, can_inspect: bool) -> str:
        return tool_cards.render_tool_result(
            self.conversation_id, self.tool_use_id, self.data, can_inspect=can_inspect
        )


@dataclass(frozen=True, slots=True)
class SkillChipItem:
    conversation_id: int
    tool_use_id: str
    skill: str
    args: str
    state: str
    error: str = ""
    hidden: bool = False

    def render(self, *, can_inspect: bool) -> str:
        return tool_cards.render_skill_call(
            self.tool_use_id,
            self.skill,
            self.args,
            self.state,
            self.error,
            out=outbound(self.conversation_id, can_inspect=can_inspect),
        )


@dataclass(frozen=True, slots=True)
class ApprovalItem:
    approval: Approval
    hidden: bool = False

    def render(self, *, can_inspect: bool) -> str:
        return rendering.render_approval(self.approval, can_inspect=can_inspect)


@dataclass(frozen=True, slots=True)
class ElicitationItem:
    """An MCP server's question mid-call (its form, or its outcome), from the run's events."""

    conversation_id: int
    data: dict[str, Any]
    hidden: bool = False

    def render(self, *, can_inspect: bool) -> str:
        return rendering.render_elicitation(
            self.conversation_id, self.data, can_inspect=can_inspect
        )


@dataclass(frozen=True, slots=True)
class QueuedItem:
    """A message waiting for the run to end (or the trace of one that left the queue)."""

    queued: QueuedMessage
    hidden: bool = False

    def render(self, *, can_inspect: bool) -> str:
        return render_to_string("skills_app/chat/_queued_message.html", {"q": self.queued})


@dataclass(frozen=True, slots=True)
class StaticItem:
    """Markup of our own (the Stop button, a notice): the same for everyone, nothing to filter."""

    html: str
    hidden: bool = False

    def render(self, *, can_inspect: bool) -> str:
        return self.html


def user_html(parts: Sequence[Part]) -> str | None:
    """The fragment for ordinary users: hidden items dropped, the rest rendered for them."""
    html = [
        wrap(part, part.item.render(can_inspect=False)) for part in parts if not part.item.hidden
    ]
    return "".join(html) or None


def inspector_html(parts: Sequence[Part]) -> str | None:
    """The fragment for people who may inspect hidden content: everything."""
    return "".join(wrap(part, part.item.render(can_inspect=True)) for part in parts) or None


def html_for(parts: Sequence[Part], *, can_inspect: bool) -> str | None:
    """The fragment for one visibility class."""
    return inspector_html(parts) if can_inspect else user_html(parts)


def wrap(part: Part, html: str) -> str:
    if part.swap == REPLACE:
        return html  # the markup names its own target (hx-swap-oob="true")
    extra = ' data-swap="update"' if part.swap == UPDATE else ""
    if part.replaces:
        extra += f' data-replaces="{escape(part.replaces)}"'
    return f'<div hx-swap-oob="beforeend:#transcript"{extra}>{html}</div>'
