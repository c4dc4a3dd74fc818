"""A server's tool and prompt definitions: stored from each listing, reviewed, and the ones that
serve.

A listing stores every definition it has not seen before as pending (a new tool, or a changed
description, schema, annotation or `_meta`: a new content hash) and records it in the audit; a
definition seen before keeps its status, so an approved tool listed again unchanged stays
approved. A tool is offered with its most recently approved definition, as long as the server
still lists the tool: a changed definition waits for review while the approved one serves.
Prompts are stored and reviewed the same way (`store_prompt_listing`), but a prompt is offered
only while the server lists the very definition a reviewer approved (`approved_prompts`).
"""

from __future__ import annotations

import json
import tempfile
import unicodedata
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from skills_app import trail
from skills_app.core.mcp import ServerSpec, ToolDefinition
from skills_app.core.mcp.connect import Place, list_tools_and_prompts
from skills_app.core.mcp.definitions import split_model_tool_name
from skills_app.core.mcp.prompts import PromptDefinition
from skills_app.core.permissions import McpHints
from skills_app.mcp.servers import McpSetupError, spec_for
from skills_app.models import AuditEvent, McpServer, McpToolDefinition


@dataclass(frozen=True, slots=True)
class ListingReport:
    """What one listing changed: tools new to review, tools whose definition changed."""

    new: tuple[str, ...]
    changed: tuple[str, ...]
    unchanged: tuple[str, ...]


def _store(
    server: McpServer, kind: str, listed: Sequence[tuple[str, str, dict[str, Any]]]
) -> ListingReport:
    """Store one listing of one kind: (name, content hash, the row's fields) per definition."""
    new: list[str] = []
    changed: list[str] = []
    unchanged: list[str] = []
    is_tool = kind == McpToolDefinition.Kind.TOOL
    with transaction.atomic():
        rows = server.definitions.filter(kind=kind)
        known = {(d.tool, d.content_hash): d for d in rows.select_for_update()}
        seen_tools = {tool for tool, _hash in known}
        rows.update(current=False)
        # A name listed twice counts once (its first definition), as a model sees one name.
        first = {name: digest for name, digest, _fields in reversed(listed)}
        for name, digest, fields in listed:
            if first[name] != digest or name in new + changed + unchanged:
                continue
            row = known.get((name, digest))
            if row is not None:
                row.current = True
                row.save(update_fields=["current"])
                unchanged.append(name)
                continue
            McpToolDefinition.objects.create(
                server=server, kind=kind, tool=name, content_hash=digest, **fields
            )
            drift = name in seen_tools
            (changed if drift else new).append(name)
            if is_tool:
                action = AuditEvent.MCP_TOOL_CHANGED if drift else AuditEvent.MCP_TOOL_NEW
            else:
                action = AuditEvent.MCP_PROMPT_CHANGED if drift else AuditEvent.MCP_PROMPT_NEW
            trail.record(
                action,
                target=f"mcp {kind} {server.name}/{name}",
                server=server.name,
                **{kind: name},
                content_hash=digest,
                previous_hashes=sorted(h for t, h in known if t == name),
            )
    return ListingReport(tuple(new), tuple(changed), tuple(unchanged))


def store_listing(server: McpServer, listed: Sequence[ToolDefinition]) -> ListingReport:
    """Store what the server listed; new and changed definitions wait for review."""
    return _store(
        server,
        McpToolDefinition.Kind.TOOL,
        [
            (
                d.name,
                d.content_hash(),
                {
                    "description": d.description,
                    "input_schema": d.input_schema,
                    "annotations": d.annotations,
                    "meta": d.meta,
                },
            )
            for d in listed
        ],
    )


def store_prompt_listing(server: McpServer, listed: Sequence[PromptDefinition]) -> ListingReport:
    """Store the prompts the server listed; new and changed ones wait for review, as tools do."""
    return _store(
        server,
        McpToolDefinition.Kind.PROMPT,
        [
            (
                p.name,
                p.content_hash(),
                {"description": p.description, "input_schema": p.as_stored()},
            )
            for p in listed
        ],
    )


def approved_prompts(
    server: McpServer, listed: Sequence[PromptDefinition]
) -> list[PromptDefinition]:
    """The listed prompts whose very definition a reviewer approved: a new or changed prompt is
    not offered until then (what `prompts/get` gives comes from the server as it is now, so no
    earlier approved definition can serve in its place)."""
    approved = set(
        server.definitions.filter(
            kind=McpToolDefinition.Kind.PROMPT, status=McpToolDefinition.Status.APPROVED
        ).values_list("tool", "content_hash")
    )
    return [p for p in listed if (p.name, p.content_hash()) in approved]


# What a review page shows of one definition whole; a longer one cannot be read there.
SHOWABLE_CHARS = 20_000
# Characters that render as nothing or reorder the text around them (zero-width, bidi
# controls, control and private-use characters): a reviewer cannot read what they say.
_UNREADABLE_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cs", "Cn"})


def list_now(server: McpServer, spec: ServerSpec | None = None) -> tuple[int, ListingReport]:
    """Connect, list the server's tools and prompts and store them (`mcp test`); raises
    McpConnectError. The report names a prompt as "prompt NAME".

    `spec`: the server as one person reaches it (an OAuth server, with their grant)."""
    with tempfile.TemporaryDirectory(prefix="mcp-test-") as folder:
        root = Path(folder)
        (root / "skills").mkdir()
        place = Place(
            root=root,
            skills_dir=root / "skills",
            sandbox=settings.SANDBOX,
            hidden_paths=(str(settings.BASE_DIR), str(settings.VAR_DIR)),
        )
        listed, prompts = async_to_sync(list_tools_and_prompts)(spec or spec_for(server), place)
    report = store_listing(server, listed)
    if prompts:
        of_prompts = store_prompt_listing(server, prompts)
        report = ListingReport(
            (*report.new, *(f"prompt {name}" for name in of_prompts.new)),
            (*report.changed, *(f"prompt {name}" for name in of_prompts.changed)),
            report.unchanged,
        )
    return len(listed), report


def shown_text(row: McpToolDefinition) -> dict[str, str]:
    """The parts of a definition a reviewer reads, as the review page prints them."""

    def text(value: Any) -> str:
        # Not escaped to \uXXXX: the reviewer reads the characters the model will get.
        return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)

    if row.kind == McpToolDefinition.Kind.PROMPT:
        return {"description": row.description, "arguments": text(row.input_schema)}
    return {
        "description": row.description,
        "input schema": text(row.input_schema),
        "annotations": text(row.annotations),
        "_meta": text(row.meta),
    }


def unshowable(row: McpToolDefinition) -> str:
    """Why this definition cannot be shown whole to a reviewer ("" when it can)."""
    parts = shown_text(row)
    size = sum(len(text) for text in parts.values())
    if size > SHOWABLE_CHARS:
        return (
            f"its definition is {size:,} characters long, more than the {SHOWABLE_CHARS:,} a "
            "review shows whole; ask the server's owner for a shorter one."
        )
    for part, text in parts.items():
        for char in text:
            if char in "\n\t" or unicodedata.category(char) not in _UNREADABLE_CATEGORIES:
                continue
            return (
                f"its {part} holds the invisible character U+{ord(char):04X}, which hides or "
                "reorders text on the screen; ask the server's owner to remove it."
            )
    return ""


# The fewest hex characters of a content hash a reviewer may name a definition by.
HASH_PREFIX_MIN = 12
_HEX = frozenset("0123456789abcdef")


class StaleReview(McpSetupError):
    """A reviewer named a definition (by hash) that no longer waits for review as it was shown."""


def full_hashes(server: McpServer, given: Sequence[str]) -> list[str]:
    """The content hashes a reviewer names, each whole or by a prefix of at least
    HASH_PREFIX_MIN hex characters, made whole.

    A prefix is matched against every definition the server ever listed, not only the pending
    ones: a later definition whose hash shares the prefix of the one read (a server can make
    one) makes it ambiguous, and it is refused rather than taken for the one the reviewer read.
    """
    known = list(server.definitions.values_list("content_hash", flat=True).distinct())
    found: list[str] = []
    for raw in given:
        prefix = raw.strip().lower()
        if len(prefix) < HASH_PREFIX_MIN or not set(prefix) <= _HEX:
            raise McpSetupError(
                f"{raw!r} is not a definition's hash: give the whole hash, or at least its "
                f"first {HASH_PREFIX_MIN} hex characters."
            )
        matches = {h for h in known if h.startswith(prefix)}
        if len(matches) > 1:
            raise McpSetupError(
                f"{raw!r} starts the hashes of {len(matches)} definitions of "
                f'"{server.name}": give more of it, or the whole hash.'
            )
        if not matches:
            raise StaleReview(f'No definition of "{server.name}" has the hash {raw!r}.')
        found.append(matches.pop())
    return found


def _why_not_pending(server: McpServer, content_hash: str, tool: str) -> str:
    row = (
        server.definitions.filter(content_hash=content_hash)
        .order_by("-current", "-first_seen_at")
        .first()
    )
    short = content_hash[:HASH_PREFIX_MIN]
    if row is None:
        return f'No definition of "{server.name}" has the hash {short}.'
    if tool and row.tool != tool:
        return f'{short} is a definition of "{row.tool}", not of "{tool}".'
    if not row.current:
        return (
            f'The server no longer describes "{row.tool}" as in {short}: its description '
            "changed since it was shown."
        )
    who = f" by {row.reviewed_by_name}" if row.reviewed_by_name else ""
    return f'"{row.tool}" as in {short} was {row.status}{who} already.'


def review(
    server: McpServer,
    *,
    approve: bool,
    reviewer: Any,
    tool: str = "",
    content_hashes: Collection[str] | None = None,
    exactly: bool = False,
    attest: Collection[str] = (),
) -> list[str]:
    """Approve or reject the pending definitions (of one tool, or all); returns the tools.

    The reviewer must not be the admin who registered the server: a second person reads
    what the server says about its tools before the model may use them. A definition that
    cannot be shown whole is never approved (`unshowable`). With `content_hashes`, only the
    definitions with those hashes (the ones the reviewer was shown) are reviewed; with
    `exactly` too, nothing is when one of them no longer waits for review as it was shown
    (StaleReview: the server changed it, or it was reviewed meanwhile). `attest`: the hashes of
    approved definitions whose readOnlyHint and destructiveHint the reviewer vouches for as
    shown (`hints`); nothing is attested by a rejection.
    """
    if server.registered_by_id is not None and server.registered_by_id == reviewer.pk:
        raise McpSetupError(
            f'{reviewer.get_username()} registered "{server.name}", so another person must '
            "review its tools."
        )
    pending = server.definitions.filter(status=McpToolDefinition.Status.PENDING, current=True)
    if tool:
        pending = pending.filter(tool=tool)
        if not pending.exists():
            listed = sorted(set(server.definitions.values_list("tool", flat=True)))
            raise McpSetupError(
                f'Nothing of "{tool}" waits for review on "{server.name}". Its tools: '
                f"{', '.join(listed) or 'none listed yet (run mcp test first)'}."
            )
    if content_hashes is not None:
        pending = pending.filter(content_hash__in=list(content_hashes))
    if approve:
        unreadable = [f"{row.tool}: {why}" for row in pending if (why := unshowable(row))]
        if unreadable:
            raise McpSetupError(
                "Not approved, as it cannot be shown whole: " + " ".join(unreadable)
            )
    status = McpToolDefinition.Status.APPROVED if approve else McpToolDefinition.Status.REJECTED
    done: list[str] = []
    with transaction.atomic():
        rows = list(pending.select_for_update())
        if exactly and content_hashes is not None:
            missing = sorted(set(content_hashes) - {row.content_hash for row in rows})
            if missing:
                raise StaleReview(" ".join(_why_not_pending(server, h, tool) for h in missing))
        for row in rows:
            row.status = status
            row.reviewed_by = reviewer
            row.reviewed_by_name = reviewer.get_username()
            row.reviewed_at = timezone.now()
            attested = approve and row.content_hash in attest and bool(hint_words(row))
            if attested:
                row.hints_attested_by = reviewer
                row.hints_attested_by_name = reviewer.get_username()
            row.save(
                update_fields=[
                    "status",
                    "reviewed_by",
                    "reviewed_by_name",
                    "reviewed_at",
                    "hints_attested_by",
                    "hints_attested_by_name",
                ]
            )
            done.append(row.tool)
            trail.record(
                AuditEvent.MCP_REVIEWED,
                target=f"mcp {row.kind} {server.name}/{row.tool}",
                actor=reviewer,
                decision=status,
                server=server.name,
                **{row.kind: row.tool},
                content_hash=row.content_hash,
                registered_by=server.registered_by_name,
                hints_attested=hint_words(row) if attested else "",
            )
    return done


# The annotations whose claim a reviewer may attest, and how the review page names them.
HINTS = ("readOnlyHint", "destructiveHint")


def hint_words(row: McpToolDefinition) -> str:
    """The attestable hints of a definition as the review page shows them ("readOnlyHint: true,
    destructiveHint: false"), "" when it states none."""
    found = [
        f"{name}: {'true' if row.annotations[name] else 'false'}"
        for name in HINTS
        if isinstance(row.annotations.get(name), bool)
    ]
    return ", ".join(found)


def _flag(row: McpToolDefinition, name: str) -> bool | None:
    value = row.annotations.get(name)
    return value if isinstance(value, bool) else None


class LazyHints(Mapping[str, McpHints]):
    """`mcp_hints()`, read from the database the first time a decision looks one up: a run's
    permission context is built for every call, and only an `mcp__` call no rule names reads
    it."""

    def __init__(self) -> None:
        self.found: dict[str, McpHints] | None = None

    def _all(self) -> dict[str, McpHints]:
        if self.found is None:
            self.found = mcp_hints()
        return self.found

    def __getitem__(self, key: str) -> McpHints:
        return self._all()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


def mcp_hints() -> dict[str, McpHints]:
    """Each offered tool's hints as `mcp__server__tool`: those of its serving definition, attested
    only while the server still lists that very definition (a changed one loses it)."""
    found: dict[str, McpHints] = {}
    rows = McpToolDefinition.objects.filter(
        kind=McpToolDefinition.Kind.TOOL, status=McpToolDefinition.Status.APPROVED
    )
    best: dict[tuple[str, str], McpToolDefinition] = {}
    for row in rows.select_related("server"):
        key = (row.server.name, row.tool)
        held = best.get(key)
        if held is None or (row.reviewed_at or row.first_seen_at) > (
            held.reviewed_at or held.first_seen_at
        ):
            best[key] = row
    for (server, tool), row in best.items():
        read_only, destructive = _flag(row, "readOnlyHint"), _flag(row, "destructiveHint")
        if read_only is None and destructive is None:
            continue
        attested = row.hints_attested_by_name if row.current else ""
        found[f"mcp__{server}__{tool}"] = McpHints(read_only, destructive, attested)
    return found


def serving(server: McpServer) -> list[ToolDefinition]:
    """The definitions the model is offered: per listed tool, the last approved one."""
    rows = server.definitions.filter(kind=McpToolDefinition.Kind.TOOL)
    listed = {r.tool for r in rows if r.current}
    best: dict[str, McpToolDefinition] = {}
    for row in rows:
        if row.status != McpToolDefinition.Status.APPROVED or row.tool not in listed:
            continue
        held = best.get(row.tool)
        if held is None or (row.reviewed_at or row.first_seen_at) > (
            held.reviewed_at or held.first_seen_at
        ):
            best[row.tool] = row
    return [
        ToolDefinition(
            name=row.tool,
            description=row.description,
            input_schema=row.input_schema,
            annotations=row.annotations,
            meta=row.meta,
        )
        for _tool, row in sorted(best.items())
    ]


def listed_tools() -> dict[str, frozenset[str]]:
    """Each registered server's name and the tools it listed last (approved or not): what an
    `mcp__` rule may name today (`core.permissions.rules.mcp_rule_problem`)."""
    found: dict[str, set[str]] = {
        name: set() for name in McpServer.objects.values_list("name", flat=True)
    }
    tools = McpToolDefinition.objects.filter(kind=McpToolDefinition.Kind.TOOL, current=True)
    for server, tool in tools.values_list("server__name", "tool"):
        found.setdefault(server, set()).add(tool)
    return {name: frozenset(tools) for name, tools in found.items()}


@dataclass(frozen=True, slots=True)
class ApprovalTerms:
    """What a person asked to approve an `mcp__` call reads about it: the server (its registered
    name and display name), the tool, the description a reviewer approved, and its hints with
    whether a reviewer attested them."""

    server: str
    server_label: str
    tool: str
    description: str
    hints: str
    attested_by: str


def approval_terms(model_tool_name: str) -> ApprovalTerms | None:
    """The serving (last approved, still listed) definition behind an `mcp__` tool name, in the
    words an approval card shows; None for another tool, or a server or tool no longer served."""
    named = split_model_tool_name(model_tool_name)
    if named is None:
        return None
    server = McpServer.objects.filter(name=named[0]).first()
    if server is None:
        return None
    # As `serving` picks it: the tool still listed, its last approved definition (which a change
    # waiting for review does not replace).
    rows = list(server.definitions.filter(kind=McpToolDefinition.Kind.TOOL, tool=named[1]))
    approved = [r for r in rows if r.status == McpToolDefinition.Status.APPROVED]
    row = max(approved, key=lambda r: r.reviewed_at or r.first_seen_at, default=None)
    if row is None or not any(r.current for r in rows):
        return None
    return ApprovalTerms(
        server=server.name,
        server_label=server.display_name or server.name,
        tool=row.tool,
        description=row.description,
        hints=hint_words(row),
        attested_by=row.hints_attested_by_name,
    )
