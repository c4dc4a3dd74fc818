"""Who may see hidden content, and the one filter everything else leaves the server through.

DESIGN.md "Visibility: one rule, enforced on the way out". A person with INSPECT_PERMISSION sees
everything. For everyone else, text that leaves the server (a page, a websocket fragment, an
export, an error, an approval prompt, the admin) goes through `outbound(conversation_id)`: hidden
rows are dropped by the callers, and every verbatim span of the conversation's hidden text (at
least `MIN_SPAN` characters; see `core/redact.py`) inside visible text is replaced by a
placeholder that says what was withheld. The model's own prose is not rewritten; an answer that
quotes hidden text is marked instead (`note_quoted_hidden`).

What is hidden is every file of every skill offered or staged in the conversation (not only the
invoked ones), the injected text and the `!` and hook output (`hidden.py`). The skills' files are
indexed once per skill version and process and shared (`hidden_library.py`); a conversation's
`HiddenIndex` combines them with its own texts, once per audience (its owner, or staff who are
not its owner and so may not read the owner's personal skills either), and is cached in this
process, keyed by what can change it: the conversation's newest invocation, hidden row and hook
event, the copies staged in its workspace, the packages and the visible-source list, and the
shared library. Checking the key is one small query and a listing of the workspace's skills/; a
stale index is never used, so text a new invocation hides is withheld from the very next
fragment.

The owner's own words (their messages, `/name` arguments, attachment names) are never withheld
from them, even where a skill's text repeats them (`hidden.conversation_own_texts`): the
owner's index carves them out of what it withholds, and the newest of those rows is part of the
key.

An `mcp__` call's input also has every stored MCP secret (a registered server's env or header
value) masked, for every viewer (`Outbound.call_input`): such a call was refused before it left,
and no page shows those values again. What is stored of such a call (`mcp_call_preview`) is
filtered the same way, for the owner's class, when it is written.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from functools import cached_property
from typing import Any

from django.db.models import CharField, F, Func, OuterRef, Subquery, Value
from django.db.models.functions import Cast, Concat

from skills_app.core.mcp.secrets import mask
from skills_app.core.redact import MIN_SPAN, HiddenIndex
from skills_app.mcp.filter import stored_secrets

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
_cache: OrderedDict[tuple[int, bool], tuple[tuple[Any, ...], HiddenIndex, int]] = OrderedDict()


def can_inspect(user: Any) -> bool:
    """True when this user may see hidden content."""
    return bool(user is not None and user.is_authenticated and user.has_perm(INSPECT_PERMISSION))


# An id no conversation has: the key's query is compiled once with it, then run with the real
# id in its place (compiling the ORM query took ten times as long as running it).
_KEY_PLACEHOLDER = -7_351_112_909
# Per database (alias, vendor): (SQL, parameters, the parameter that is the conversation's id).
_key_statements: dict[tuple[str, str], tuple[str, tuple[Any, ...], int]] = {}


def _index_key(conversation_id: int) -> tuple[Any, ...]:
    """What the conversation's hidden texts depend on, in one query: (owner id, ...).

    The values are the database's own (not converted to Python types): a key is only compared
    with keys read the same way.
    """
    from django.db import DEFAULT_DB_ALIAS, connections

    connection = connections[DEFAULT_DB_ALIAS]
    slot = (connection.alias, connection.vendor)
    statement = _key_statements.get(slot)
    if statement is None:
        query = _key_query(_KEY_PLACEHOLDER).query
        sql, params = query.get_compiler(using=connection.alias).as_sql()
        found = [i for i, value in enumerate(params) if value == _KEY_PLACEHOLDER]
        if len(found) != 1:
            raise RuntimeError(f"the hidden-index key query has {len(found)} conversation ids")
        statement = _key_statements[slot] = (sql, tuple(params), found[0])
    sql, params, at = statement
    with connection.cursor() as cursor:
        cursor.execute(sql, (*params[:at], conversation_id, *params[at + 1 :]))
        row = cursor.fetchone()
    return tuple(row) if row is not None else ()


def _key_query(conversation_id: int) -> Any:
    """The query of `_index_key` (one row, or none for a conversation that does not exist)."""
    from skills_app.models import (
        Conversation,
        Message,
        RunEvent,
        SkillInvocation,
        SkillPackage,
        VisibleSkillSource,
    )

    def newest(queryset: Any) -> Subquery:
        # The id and the time it was written: an id can come back after a rolled-back insert
        # (SQLite's sequence rolls back with it), and a stale index would then miss new text.
        stamp = Concat(Cast("pk", CharField()), Value("@"), Cast("created_at", CharField()))
        return Subquery(queryset.order_by("-pk").values(stamp=stamp)[:1])

    def count(model: Any) -> Subquery:
        # A plain COUNT (not an aggregate to Django, so no GROUP BY): deletions change it.
        return Subquery(model.objects.order_by().values(n=Func(F("pk"), function="COUNT"))[:1])

    return (
        Conversation.objects.filter(pk=conversation_id)
        .annotate(
            inv=newest(SkillInvocation.objects.filter(conversation=OuterRef("pk"))),
            meta=newest(Message.objects.filter(conversation=OuterRef("pk"), is_meta=True)),
            hook=newest(RunEvent.objects.filter(conversation=OuterRef("pk"), type="audit.hook")),
            packages_changed=Subquery(
                SkillPackage.objects.order_by("-updated_at").values("updated_at")[:1]
            ),
            packages=count(SkillPackage),
            active_newest=Subquery(
                SkillPackage.objects.order_by("-active_version_id").values("active_version_id")[:1]
            ),
            visible_newest=newest(VisibleSkillSource.objects.all()),
            visible=count(VisibleSkillSource),
            own=newest(
                Message.objects.filter(
                    conversation=OuterRef("pk"),
                    role=Message.USER,
                    is_meta=False,
                    kind__in=("text", "command", "attachments"),
                )
            ),
        )
        .values_list(
            "owner_id",
            "inv",
            "meta",
            "hook",
            "packages_changed",
            "packages",
            "active_newest",
            "visible_newest",
            "visible",
            "own",
            # A conversation id can come back too (tests roll back; so can a failed insert).
            "created_at",
        )
        .order_by()[:1]
    )


def hidden_index(conversation_id: int, *, viewer_id: int | None = None) -> HiddenIndex:
    """The conversation's hidden texts for a viewer without the inspect permission, indexed
    (cached; rebuilt when they may have changed). `viewer_id` None: the conversation's owner."""
    from skills_app.hidden import conversation_index, staged_state
    from skills_app.hidden_library import library

    key = _index_key(conversation_id)
    if not key:
        return HiddenIndex()
    owner_view = viewer_id is None or viewer_id == key[0]
    shared = library(key[4:7])
    key = (*key, staged_state(conversation_id), id(shared))
    slot = (conversation_id, owner_view)
    with _lock:
        cached = _cache.get(slot)
        if cached is not None and cached[0] == key:
            _cache.move_to_end(slot)
            return cached[1]
    index, size = conversation_index(conversation_id, shared, owner_view=owner_view)
    with _lock:
        _cache[slot] = (key, index, size)
        _cache.move_to_end(slot)
        while len(_cache) > 1 and (
            len(_cache) > CACHE_SIZE or sum(entry[2] for entry in _cache.values()) > CACHE_MAX_CHARS
        ):
            _cache.popitem(last=False)
    return index


def forget(conversation_id: int | None = None) -> None:
    """Drop cached indexes (one conversation, or all, with the skill library): for tests and
    after bulk changes."""
    from skills_app import hidden_library

    with _lock:
        if conversation_id is None:
            _cache.clear()
        else:
            for slot in [s for s in _cache if s[0] == conversation_id]:
                del _cache[slot]
    if conversation_id is None:
        hidden_library.forget()


class Outbound:
    """How text of one conversation leaves the server for one viewer class.

    Inspectors get text as it is; everyone else gets it through the conversation's HiddenIndex,
    built on first use (so rendering for an inspector never builds it).
    """

    def __init__(
        self, conversation_id: int | None, *, can_inspect: bool, viewer_id: int | None = None
    ) -> None:
        self.conversation_id = conversation_id
        self.can_inspect = can_inspect
        self.viewer_id = viewer_id

    @cached_property
    def index(self) -> HiddenIndex:
        if self.conversation_id is None:
            return HiddenIndex([])
        return hidden_index(self.conversation_id, viewer_id=self.viewer_id)

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

    @cached_property
    def mcp_secrets(self) -> tuple[str, ...]:
        """The registered MCP servers' stored secrets, read once per filter (a page, a batch)."""
        return stored_secrets()

    def call_input(self, tool: str, value: Any) -> Any:
        """A tool call's input as this viewer may see it: filtered, and for an `mcp__` call
        with every stored MCP secret masked, for every viewer, an inspector included (no page
        shows an env or header value again; the call carrying one was refused, never sent)."""
        if tool.startswith("mcp__"):
            value = mask(value, self.mcp_secrets)
        return self.value(value)


def outbound(
    conversation_id: int | None, *, can_inspect: bool, viewer_id: int | None = None
) -> Outbound:
    """The filter for text of this conversation leaving for this viewer class.

    `viewer_id`: who reads it, when that may be someone other than the conversation's owner
    (the admin, the audit, the rule tester): the owner's personal skills are hidden from them.
    """
    return Outbound(conversation_id, can_inspect=can_inspect, viewer_id=viewer_id)


def mcp_call_preview(conversation_id: int | None, tool: str, value: Any) -> Any:
    """An `mcp__` call's arguments as every record of it keeps them (its run events, decisions,
    audit row and span): stored MCP secrets masked and the conversation's hidden text withheld,
    as an ordinary viewer sees them; other tools' input as it is."""
    if not tool.startswith("mcp__"):
        return value
    return outbound(conversation_id, can_inspect=False).call_input(tool, value)


def _filter_value(value: Any, redact: Redactor) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _filter_value(v, redact) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_filter_value(v, redact) for v in value]
    return value


def quotes_hidden(conversation_id: int, value: Any, *, can_inspect: bool) -> bool:
    """True when any text in `value` would be withheld from the conversation's owner (their own
    words aside). A call its person cannot read in full is refused rather than offered."""
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
