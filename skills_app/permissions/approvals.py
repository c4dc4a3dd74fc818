"""Permission decisions for a run, and the approvals that answer an `ask`.

The question lives in the database (`Approval`), so any tab, a reload or another process can
answer it; `answer_approval` is the API the browser and the CLI call.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from skills_app.core.agent import TurnState
from skills_app.core.permissions import (
    Decision,
    PermissionContext,
    Rule,
    RuleSyntaxError,
    ToolCall,
    call_as_rule_text,
    decide,
    grant_rule_for,
    parse_rule,
    removed_tools,
)
from skills_app.core.permissions import describe as describe_rule
from skills_app.core.review import Consent, consent_rules, covering_entry
from skills_app.core.review.consent import covered_rule
from skills_app.core.tools.workspace import Workspace, skill_folder_name
from skills_app.mcp.definitions import LazyHints
from skills_app.models import Approval, ConversationGrant, PermissionRule, Run
from skills_app.models.statements import Statement
from skills_app.permissions.decisions import record_decision
from skills_app.policy.rules import applies

logger = logging.getLogger(__name__)

ANSWERS = (Approval.ALLOW_ONCE, Approval.ALLOW_CONVERSATION, Approval.DENY)
# Said to the model (and shown in the tool card) instead of asking someone who could not read it.
QUOTES_HIDDEN = (
    "this {what} quotes the skill's instructions and is not among its reviewed commands; "
    "ask a skill manager"
)
_SKILL_TOOLS = ("Skill", "load_skill", "skill_load")
POLL_SECONDS = 0.25

# approval id -> event set when an answer arrives in this process (other processes poll the row).
_WAITERS: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Event]] = {}


class ApprovalError(Exception):
    """An answer that cannot be taken; the message says why."""


def admin_rules(user_id: int | None = None) -> list[Rule]:
    """Enabled admin rules that apply to `user_id`, as the core sees them.

    Read at every decision, so edits apply at once. A rule limited to groups or people
    (`policy.rules`) applies only to them; with no user only the rules for everyone apply.

    The rows are read each time (precompiled statements: `models.statements`), and parsed again
    only when they differ from the rows the last parse was made from: any change an admin makes
    (a rule added, edited, disabled, moved, deleted, its audience changed, a person's groups
    changed) changes the rows read, so it decides the very next call.
    """
    book = _rule_book()
    group_ids: frozenset[int] = frozenset()
    if user_id is not None and book.limited:
        group_ids = frozenset(g for (g,) in _USER_GROUPS.rows(user_id))
    return [
        rule
        for rule in book.rules
        if applies(book.limited.get(rule.rule_id or 0), user_id, group_ids)
    ]


def conversation_grants(conversation_id: int) -> list[Rule]:
    """The conversation's "allow for this conversation" rules, read at every decision (parsed
    again only when its grant rows changed)."""
    rows = _GRANT_ROWS.rows(conversation_id)
    if not rows:
        return []
    with _books_lock:
        parsed = _grant_books.get(rows)
    if parsed is None:
        parsed = []
        for pk, text in rows:
            try:
                parsed.append(parse_rule(text, "allow", source="conversation", rule_id=pk))
            except RuleSyntaxError:
                logger.warning("ignoring malformed grant #%s", pk)
        with _books_lock:
            if len(_grant_books) >= _GRANT_BOOKS:
                _grant_books.clear()
            _grant_books[rows] = parsed
    return list(parsed)


@dataclass(frozen=True, slots=True)
class _RuleBook:
    """The enabled admin rules parsed, and who each limited one applies to, with the rows they
    were made from."""

    key: tuple[object, ...]
    rules: tuple[Rule, ...]
    limited: Mapping[int, tuple[frozenset[int], frozenset[int]]]


def _rule_book() -> _RuleBook:
    global _last_book
    key = (_RULE_ROWS.rows(), _RULE_GROUPS.rows(), _RULE_USERS.rows())
    book = _last_book
    if book is not None and book.key == key:
        return book
    rows, group_rows, user_rows = key
    rules: list[Rule] = []
    for pk, behavior, text, skill, note in rows:
        try:
            rules.append(
                parse_rule(
                    text, behavior, source="admin", rule_id=pk, scope_skill=skill or None, note=note
                )
            )
        except RuleSyntaxError as exc:
            logger.warning("ignoring malformed permission rule #%s: %s", pk, exc)
    groups: dict[int, set[int]] = {}
    users: dict[int, set[int]] = {}
    for rule_id, group_id in group_rows:
        groups.setdefault(rule_id, set()).add(group_id)
    for rule_id, person_id in user_rows:
        users.setdefault(rule_id, set()).add(person_id)
    limited = {
        rule_id: (frozenset(groups.get(rule_id, ())), frozenset(users.get(rule_id, ())))
        for rule_id in set(groups) | set(users)
    }
    book = _last_book = _RuleBook(key, tuple(rules), limited)
    return book


# The statements of `admin_rules` and `conversation_grants`, and the parses they keep.
_RULE_ROWS = Statement(
    lambda: (
        PermissionRule.objects.filter(enabled=True)
        .order_by("position", "id")
        .values_list("id", "behavior", "rule_text", "skill", "note")
    )
)
_RULE_GROUPS = Statement(
    lambda: (
        PermissionRule.applies_to_groups.through.objects.filter(permissionrule__enabled=True)
        .order_by("permissionrule_id", "group_id")
        .values_list("permissionrule_id", "group_id")
    )
)
_RULE_USERS = Statement(
    lambda: (
        PermissionRule.applies_to_users.through.objects.filter(permissionrule__enabled=True)
        .order_by("permissionrule_id", "user_id")
        .values_list("permissionrule_id", "user_id")
    )
)
_USER_GROUPS = Statement(
    lambda user_id: (
        get_user_model()
        .groups.through.objects.filter(user_id=user_id)
        .order_by("group_id")
        .values_list("group_id")
    ),
    values=1,
)
_GRANT_ROWS = Statement(
    lambda conversation_id: (
        ConversationGrant.objects.filter(conversation_id=conversation_id)
        .order_by("created_at", "id")
        .values_list("id", "rule_text")
    ),
    values=1,
)
_books_lock = threading.Lock()
_last_book: _RuleBook | None = None
_GRANT_BOOKS = 256
_grant_books: dict[tuple[tuple[object, ...], ...], list[Rule]] = {}


@dataclass(slots=True)
class PermissionGate:
    """The `decide` callable of one run: rules first, then the user when the rules say ask.

    Between the two, the consent of the skills active in the turn (`consents`: an approved
    review's manifest, or a bundled skill's install): their reviewed `allowed-tools` stand in
    for the skill's own, and a call that is exactly one of their reviewed commands is allowed
    without asking (docs/review.md). Deny rules and an admin's ask rules come first. A call
    still left to ask that quotes hidden skill text (`quotes_hidden`) is refused instead: its
    user could not read what they would approve. A call `leaves` stops (an `mcp__` call whose
    arguments carry hidden text or a stored secret: `skills_app.mcp.filter`) is refused whatever
    the rules allowed, short of a deny. Every decision is recorded with its reason.
    """

    conversation_id: int
    run_id: int
    user_id: int
    workspace: Workspace
    record: Callable[..., Awaitable[int]]
    auto_answer: str | None = None
    timeout: float = field(default_factory=lambda: float(settings.APPROVAL_TIMEOUT))
    consents: Mapping[str, Consent] = field(default_factory=dict)
    quotes_hidden: Callable[[ToolCall], bool] | None = None
    # Why a call may not leave for another system, and the call as the audit keeps it (None:
    # it may). Sync: it may query.
    leaves: Callable[[ToolCall], tuple[str, ToolCall] | None] | None = None
    # The call as its decision row keeps it (an mcp__ call's arguments filtered:
    # `visibility.mcp_call_preview`). Sync: it may query.
    kept: Callable[[ToolCall], ToolCall] | None = None
    # The staged folders of the skills the conversation may use (None: every staged copy).
    offered_folders: frozenset[str] | None = None
    # Whether a consent still holds now (`registry.consents.still_live`): the consents are read
    # when the run starts, and a skill disabled, rolled back or taken from the person's groups
    # meanwhile must stop running unasked at once, not when the run ends.
    live: Callable[[Consent], bool] | None = None

    def _consents(self, state: TurnState) -> list[Consent]:
        names = dict.fromkeys(state.active_skills)
        found = [self.consents[n] for n in names if n in self.consents]
        if self.live is not None:
            found = [c for c in found if self.live(c)]
        return found

    def _skill_dir(self, name: str) -> str:
        return str(self.workspace.skills_dir / skill_folder_name(name))

    def context(self, state: TurnState, consents: list[Consent] | None = None) -> PermissionContext:
        if consents is None:
            consents = self._consents(state)
        reviewed = {c.skill for c in consents if c.reviewed}
        # A reviewed skill's allowed-tools apply as the reviewer approved them (the consented
        # entries of its manifest), not as the skill states them.
        rules = [
            r
            for r in state.skill_rules
            if not (r.source == "skill" and r.behavior == "allow" and r.scope_skill in reviewed)
        ]
        rules += [rule for c in consents for rule in consent_rules(c, self._skill_dir(c.skill))]
        return PermissionContext(
            workspace=self.workspace.root,
            admin_rules=admin_rules(self.user_id),
            active_skills=tuple(state.active_skills),
            skill_rules=tuple(rules),
            grants=tuple(conversation_grants(self.conversation_id)),
            readable_roots=(self.workspace.skills_dir,),
            offered_skill_folders=self.offered_folders,
            mcp_hints=LazyHints(),
        )

    def removed_tools(self, names: list[str]) -> frozenset[str]:
        return removed_tools(names, self.context(TurnState()))

    def rules(self, call: ToolCall, state: TurnState) -> Decision:
        """The rules and the reviewed commands of the turn's skills; never asks anyone."""
        consents = self._consents(state)
        decision = decide(call, self.context(state, consents))
        if decision.behavior == "ask" and (
            decision.rule is None or decision.rule.source != "admin"
        ):
            for consent in consents:
                entry = covering_entry(consent, call, self._skill_dir(consent.skill))
                if entry is not None:
                    rule = covered_rule(consent, entry)
                    return Decision("allow", describe_rule(rule), rule)
        return decision

    def _record(self, call: ToolCall, decision: Decision, state: TurnState, **kw: object) -> None:
        skill = state.active_skills[-1] if state.active_skills else ""
        record_decision(
            conversation_id=self.conversation_id,
            run_id=self.run_id,
            call=self.kept(call) if self.kept is not None else call,
            decision=decision,
            skill=skill,
            consents=self.consents,
            **kw,  # type: ignore[arg-type]
        )

    def _checked(self, call: ToolCall, state: TurnState) -> Decision:
        decision = self.rules(call, state)
        if call.tool not in _SKILL_TOOLS:
            # A skill's own loading is audited by its invocation row (a user's /name included).
            self._record(call, decision, state)
        return decision

    async def check(self, call: ToolCall, state: TurnState) -> Decision:
        """The rules alone, recorded (for `!` commands and skill hooks)."""
        return await sync_to_async(self._checked)(call, state)

    def _first(self, call: ToolCall, state: TurnState) -> tuple[Decision, bool]:
        """The rules' decision, or a refusal (True) when asking would show hidden text."""
        decision = self.rules(call, state)
        stopped = None
        if decision.behavior != "deny" and self.leaves is not None:
            stopped = self.leaves(call)
        if stopped is not None:
            reason, kept = stopped
            refusal = Decision("deny", reason, None)
            self._record(kept, refusal, state, refused=True)
            return refusal, True
        if decision.behavior != "ask":
            self._record(call, decision, state)
            return decision, False
        if self.quotes_hidden is not None and self.quotes_hidden(call):
            what = "command" if call.tool == "Bash" else "call"
            refusal = Decision("deny", QUOTES_HIDDEN.format(what=what), None)
            self._record(call, refusal, state, refused=True)
            return refusal, True
        return decision, False

    async def decide(self, call: ToolCall, state: TurnState) -> Decision:
        decision, _refused = await sync_to_async(self._first)(call, state)
        if decision.behavior != "ask":
            return decision
        skill = state.active_skills[-1] if state.active_skills else ""
        approval = await sync_to_async(_create_approval)(
            self.conversation_id, self.run_id, call, decision, skill
        )
        await self.record(
            "approval.requested",
            {
                "approval_id": approval.pk,
                "tool": approval.tool,
                "call": approval.call_text,
                "rule": approval.rule_text,
                "reason": approval.reason,
                "skill": skill,
            },
        )
        if self.auto_answer is not None:
            reason = (
                ""
                if self.auto_answer != Approval.DENY
                else ("No one was asked: run the chat command with --yes to allow such calls.")
            )
            await sync_to_async(answer_approval)(
                approval.pk, self.user_id, self.auto_answer, reason=reason
            )
        answered = await self._wait(approval.pk)
        await self.record(
            "approval.answered",
            {"approval_id": answered.pk, "status": answered.status, "by": answered.answered_by_id},
        )
        final = replace(_decision_for(answered, call), approval_id=answered.pk)
        await sync_to_async(self._record)(call, final, state, approval=answered, asked_by=decision)
        return final

    async def _wait(self, approval_id: int) -> Approval:
        loop = asyncio.get_running_loop()
        event = asyncio.Event()
        _WAITERS[approval_id] = (loop, event)
        deadline = loop.time() + self.timeout
        try:
            while True:
                row = await Approval.objects.select_related("answered_by").aget(pk=approval_id)
                if row.status != Approval.PENDING:
                    return row
                remaining = deadline - loop.time()
                if remaining <= 0:
                    await sync_to_async(_expire)(approval_id)
                    return await Approval.objects.select_related("answered_by").aget(pk=approval_id)
                try:
                    await asyncio.wait_for(event.wait(), timeout=min(POLL_SECONDS, remaining))
                except TimeoutError:
                    pass
        except asyncio.CancelledError:
            # Stopped while asking: the question is withdrawn, and every tab is told so (its
            # buttons go) before the run ends; the run's end finds nothing pending left.
            if await sync_to_async(_cancel)(approval_id):
                await self.record(
                    "approval.answered",
                    {"approval_id": approval_id, "status": Approval.CANCELLED, "by": None},
                )
            raise
        finally:
            _WAITERS.pop(approval_id, None)
            await Run.objects.filter(pk=self.run_id, status=Run.WAITING).aupdate(status=Run.RUNNING)


def _create_approval(
    conversation_id: int, run_id: int, call: ToolCall, decision: Decision, skill: str
) -> Approval:
    with transaction.atomic():
        approval = Approval.objects.create(
            conversation_id=conversation_id,
            run_id=run_id,
            tool=call.tool,
            input=dict(call.input),
            call_text=call_as_rule_text(call),
            skill=skill,
            rule_text=decision.rule.text if decision.rule else "",
            reason=decision.reason,
        )
        Run.objects.filter(pk=run_id).update(status=Run.WAITING)
    return approval


def _expire(approval_id: int) -> None:
    Approval.objects.filter(pk=approval_id, status=Approval.PENDING).update(
        status=Approval.TIMEOUT, answered_at=timezone.now()
    )


def _cancel(approval_id: int) -> bool:
    """Withdraw a pending question; False when it had been answered already."""
    return bool(
        Approval.objects.filter(pk=approval_id, status=Approval.PENDING).update(
            status=Approval.CANCELLED, answered_at=timezone.now()
        )
    )


def _decision_for(approval: Approval, call: ToolCall) -> Decision:
    who = approval.answered_by.get_username() if approval.answered_by else "the user"
    if approval.status == Approval.ALLOW_ONCE:
        return Decision("allow", f"approved once by {who}", None)
    if approval.status == Approval.ALLOW_CONVERSATION:
        return Decision("allow", f"approved by {who} for this conversation", None)
    if approval.status == Approval.TIMEOUT:
        return Decision(
            "deny",
            f"nobody answered the approval request within {settings.APPROVAL_TIMEOUT} s, "
            "so it counts as denied",
            None,
        )
    if approval.status == Approval.CANCELLED:
        return Decision("deny", "the approval request was cancelled", None)
    reason = f"denied by {who}"
    if approval.deny_reason:
        reason += f": {approval.deny_reason}"
    return Decision("deny", reason, None)


def answer_approval(approval_id: int, user_id: int, answer: str, *, reason: str = "") -> Approval:
    """Answer a pending approval; the first answer wins, a later one raises ApprovalError."""
    if answer not in ANSWERS:
        raise ApprovalError(f"Unknown answer {answer!r}; use one of {', '.join(ANSWERS)}.")
    with transaction.atomic():
        updated = Approval.objects.filter(pk=approval_id, status=Approval.PENDING).update(
            status=answer,
            answered_by_id=user_id,
            answered_at=timezone.now(),
            deny_reason=reason[:2000] if answer == Approval.DENY else "",
        )
        approval = Approval.objects.select_related("answered_by").get(pk=approval_id)
        if not updated:
            raise ApprovalError(
                f"This request was already answered ({approval.get_status_display()})."
            )
        if answer == Approval.ALLOW_CONVERSATION:
            call = ToolCall(tool=approval.tool, input=approval.input)
            ConversationGrant.objects.create(
                conversation_id=approval.conversation_id,
                rule_text=grant_rule_for(call).text,
                approval=approval,
            )
    waiter = _WAITERS.get(approval_id)
    if waiter is not None:
        loop, event = waiter
        loop.call_soon_threadsafe(event.set)
    return approval


def pending_approvals(conversation_id: int) -> list[Approval]:
    return list(Approval.objects.filter(conversation_id=conversation_id, status=Approval.PENDING))


def describe(approval: Approval) -> dict[str, Any]:
    return {
        "id": approval.pk,
        "tool": approval.tool,
        "call": approval.call_text,
        "rule": approval.rule_text,
        "reason": approval.reason,
        "skill": approval.skill,
        "status": approval.status,
    }
