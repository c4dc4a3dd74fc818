"""Who may see hidden content, and the one filter everything else leaves the server through.

DESIGN.md "Visibility: one rule, enforced on the way out". A person with INSPECT_PERMISSION sees
everything. For everyone else, text that leaves the server (a page, a websocket fragment, an
export, an error, an approval prompt, the admin) goes through `outbound(conversation_id)`: hidden
rows are dropped by the callers, and every verbatim span of the conversation's hidden text (at
least `MIN_SPAN` characters; see `core/redact.py`) inside visible text is replaced by a
placeholder that says what was withheld. The model's own prose is not rewritten; an answer that
quotes hidden text is marked instead (`note_quoted_hidden`).

The conversation's `HiddenIndex` is built once and cached in this process, keyed by what can
change it: the conversation's newest invocation, hidden row and hook event, and the
source-visibility choices (package changes, the visible-source list). Checking the key is one
small query; a stale index is never used, so text a new invocation hides is withheld from the
very next fragment.

The owner's own words (their messages, `/name` arguments, attachment names) are never withheld
from them, even where a skill's text repeats them (`hidden.conversation_own_texts`): a
conversation is read by its owner (and by inspectors, who see everything), so the index of a
conversation carves its owner's words out of what it withholds. The newest of those rows is
part of the key.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from functools import cached_property
from typing import Any

from django.db.models import F, Func, OuterRef, Subquery

from skills_app.core.redact import MIN_SPAN, HiddenIndex

# Holders see injected skill text, hidden messages and dynamic-context output; nobody else does.
INSPECT_PERMISSION = "skills_app.inspect_injected_content"
# Holders may run commands when no sandbox is available (SANDBOX=none, or auto without bwrap).
UNSANDBOXED_PERMISSION = "skills_app.run_unsandboxed_commands"
# Conversations whose index this process keeps (least recently used go first), and the most
# hidden text all kept indexes may hold together (an index costs about 1/16 entry per character).
CACHE_SIZE = 64
CACHE_MAX_CHARS = 32 * 1024 * 1024

Redactor = Callable[[str], str]

_lock = threading.Lock()
_cache: OrderedDict[int, tuple[tuple[Any, ...], HiddenIndex, int]] = OrderedDict()


def can_inspect(user: Any) -> bool:
    """True when this user may see hidden content."""
    return bool(user is not None and user.is_authenticated and user.has_perm(INSPECT_PERMISSION))


def _index_key(conversation_id: int) -> tuple[Any, ...]:
    """What the conversation's hidden texts depend on, in one query."""
    from skills_app.models import (
        Conversation,
        Message,
        RunEvent,
        SkillInvocation,
        SkillPackage,
        VisibleSkillSource,
    )

    def newest(queryset: Any) -> Subquery:
        return Subquery(queryset.order_by("-pk").values("pk")[:1])

    def count(model: Any) -> Subquery:
        # A plain COUNT (not an aggregate to Django, so no GROUP BY): deletions change it.
        return Subquery(model.objects.order_by().values(n=Func(F("pk"), function="COUNT"))[:1])

    row = (
        Conversation.objects.filter(pk=conversation_id)
        .annotate(
            inv=newest(SkillInvocation.objects.filter(conversation=OuterRef("pk"))),
            meta=newest(Message.objects.filter(conversation=OuterRef("pk"), is_meta=True)),
            hook=newest(RunEvent.objects.filter(conversation=OuterRef("pk"), type="audit.hook")),
            own=newest(
                Message.objects.filter(
                    conversation=OuterRef("pk"),
                    role=Message.USER,
                    is_meta=False,
                    kind__in=("text", "command", "attachments"),
                )
            ),
            packages_changed=Subquery(
                SkillPackage.objects.order_by("-updated_at").values("updated_at")[:1]
            ),
            packages=count(SkillPackage),
            visible_newest=newest(VisibleSkillSource.objects.all()),
            visible=count(VisibleSkillSource),
        )
        .values_list(
            "inv",
            "meta",
            "hook",
            "own",
            "packages_changed",
            "packages",
            "visible_newest",
            "visible",
        )
        .first()
    )
    return tuple(row) if row is not None else ()


def hidden_index(conversation_id: int) -> HiddenIndex:
    """The conversation's hidden texts, indexed (cached; rebuilt when they may have changed)."""
    from skills_app.hidden import conversation_hidden_texts, conversation_own_texts

    key = _index_key(conversation_id)
    with _lock:
        cached = _cache.get(conversation_id)
        if cached is not None and cached[0] == key:
            _cache.move_to_end(conversation_id)
            return cached[1]
    texts = conversation_hidden_texts(conversation_id) if key else []
    own = conversation_own_texts(conversation_id) if key and texts else []
    index = HiddenIndex(texts, own=own)
    size = sum(len(t.text) for t in texts)
    with _lock:
        _cache[conversation_id] = (key, index, size)
        _cache.move_to_end(conversation_id)
        while len(_cache) > 1 and (
            len(_cache) > CACHE_SIZE or sum(entry[2] for entry in _cache.values()) > CACHE_MAX_CHARS
        ):
            _cache.popitem(last=False)
    return index


def forget(conversation_id: int | None = None) -> None:
    """Drop cached indexes (one conversation, or all): for tests and after bulk changes."""
    with _lock:
        if conversation_id is None:
            _cache.clear()
        else:
            _cache.pop(conversation_id, None)


class Outbound:
    """How text of one conversation leaves the server for one viewer class.

    Inspectors get text as it is; everyone else gets it through the conversation's HiddenIndex,
    built on first use (so rendering for an inspector never builds it).
    """

    def __init__(self, conversation_id: int | None, *, can_inspect: bool) -> None:
        self.conversation_id = conversation_id
        self.can_inspect = can_inspect

    @cached_property
    def index(self) -> HiddenIndex:
        if self.conversation_id is None:
            return HiddenIndex([])
        return hidden_index(self.conversation_id)

    def text(self, text: str) -> str:
        """`text` as this viewer may see it."""
        if self.can_inspect or not isinstance(text, str) or len(text) < MIN_SPAN:
            return text
        return self.index.redact(text)

    def value(self, value: Any) -> Any:
        """A JSON-like value with every string in it filtered (keys stay)."""
        if self.can_inspect:
            return value
        return _filter_value(value, self.text)


def outbound(conversation_id: int | None, *, can_inspect: bool) -> Outbound:
    """The filter for text of this conversation leaving for this viewer class."""
    return Outbound(conversation_id, can_inspect=can_inspect)


def _filter_value(value: Any, redact: Redactor) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _filter_value(v, redact) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_filter_value(v, redact) for v in value]
    return value


def quotes_hidden(conversation_id: int, value: Any, *, can_inspect: bool) -> bool:
    """True when any text in `value` would be withheld from this viewer (their own words aside).

    A call its user cannot read in full is refused rather than offered for approval.
    """
    if can_inspect:
        return False
    index = hidden_index(conversation_id)
    if not index:
        return False
    found: list[bool] = []

    def check(text: str) -> str:
        if not found and len(text) >= MIN_SPAN and index.spans(text):
            found.append(True)
        return text

    _filter_value(value, check)
    return bool(found)


def note_quoted_hidden(conversation_id: int, run_id: int | None, text: str) -> bool:
    """True when an answer quotes hidden text verbatim; marks its run for the audit."""
    if len(text) < MIN_SPAN or not hidden_index(conversation_id).contains_hidden(text):
        return False
    if run_id is not None:
        from skills_app.models import Run

        Run.objects.filter(pk=run_id, quoted_hidden=False).update(quoted_hidden=True)
    return True
