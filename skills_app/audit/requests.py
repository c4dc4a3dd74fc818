"""The audit's computations: "what the model saw" for every model call, and its measures.

Since requests are captured (`runs.usage`), a call's view is its captured request: the body the
adapter sent, rebuilt from the capture and checked against the digest taken when it was sent. It
does not change when skills, rules or settings change later.

Runs recorded before captures existed fall back to a rebuild, marked as such. How the rows before
each call are found: the agent stores a message (a `message` RunEvent carrying
`message_id`) before it emits the `model.call` RunEvent of the request that includes it, and both
events take gap-free per-conversation sequence numbers. So the rows of call k are the rows whose
`message` event has a lower seq than that call's `model.call` event, plus any row written without an
event (interrupted-run repairs, imports) whose `created_at` is not later than the call event's.
The turn's context (tools removed by a skill's `disallowed-tools`, its `model`) is replayed from
the run's allowed SkillInvocation rows that produced one of those rows. The model is the one the run
recorded for that call; the tool list and the catalog come from the current skill registry and
admin rules, so they match what was sent unless skills or bare-deny rules changed since.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings

# The measures live in `measure`; their names stay importable from here.
from skills_app.audit.measure import SIZE_PARTS as SIZE_PARTS
from skills_app.audit.measure import LayerSaving as LayerSaving
from skills_app.audit.measure import catalog_of
from skills_app.audit.measure import common_prefix as common_prefix
from skills_app.audit.measure import estimate_tokens as estimate_tokens
from skills_app.audit.measure import layer_saving as layer_saving
from skills_app.audit.measure import size_breakdown as size_breakdown
from skills_app.core.agent import TurnState
from skills_app.core.llm import ModelRequest
from skills_app.core.permissions import (
    PermissionContext,
    RuleSyntaxError,
    parse_rule,
    removed_tools,
)
from skills_app.core.request import compose_request
from skills_app.core.skilltool import SKILL_TOOL
from skills_app.core.tools import default_tools
from skills_app.core.transcript import StoredMessage, text_of
from skills_app.models import Conversation, Message, ModelCall, Run, RunEvent, SkillInvocation
from skills_app.permissions.approvals import admin_rules
from skills_app.runs import agent_setup, usage


@dataclass(frozen=True, slots=True)
class RequestView:
    """One model request: the captured body, or (older runs) one rebuilt from the stored rows."""

    run_id: int | None
    call: int
    body: dict[str, Any]
    message_ids: tuple[int, ...]
    at: str = ""
    disallowed_tools: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    # Captured when sent (False: rebuilt today from the rows, for a run older than captures).
    captured: bool = False
    # The rebuilt capture matches the digest of what was sent.
    verified: bool = False
    model_call: ModelCall | None = None

    def as_kwargs(self) -> dict[str, Any]:
        """The request body, as `ModelRequest.as_kwargs` gives it (what the test server got)."""
        return self.body

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    @property
    def max_tokens(self) -> int:
        return int(self.body.get("max_tokens") or 0)

    @property
    def system(self) -> str:
        """The system prompt's text (sent as text blocks, or as a string without caching)."""
        system = self.body.get("system") or ""
        if isinstance(system, str):
            return system
        return text_of(system, sep="")

    @property
    def tools(self) -> list[dict[str, Any]]:
        return list(self.body.get("tools") or [])

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def catalog(self) -> str:
        """The Skill tool's description (Layer 1), empty when the tool was not offered."""
        return catalog_of(self.tools)


# -- rebuilding requests ------------------------------------------------------------------------


REBUILT_NOTE = (
    "Rebuilt, not captured: this run was recorded before requests were captured, so its tools "
    "and catalog are today's and may differ from what was sent."
)


@dataclass(frozen=True, slots=True)
class _Row:
    pk: int
    seq: int
    created_at: datetime
    invocation_id: int | None
    stored: StoredMessage


def requests_for_run(run: Run) -> list[RequestView]:
    """Every model request of `run`, in call order, rebuilt from the database."""
    return requests_for_conversation(run.conversation, runs=[run]).get(run.pk, [])


def requests_for_conversation(
    conversation: Conversation, *, runs: Iterable[Run] | None = None
) -> dict[int, list[RequestView]]:
    """run id -> its requests (captured, else rebuilt), for the given runs (default: all)."""
    run_list = list(runs) if runs is not None else list(conversation.runs.order_by("started_at"))
    if not run_list:
        return {}
    calls = ModelCall.objects.filter(run_id__in=[r.pk for r in run_list]).select_related(
        "system", "tools"
    )
    by_run: dict[int, list[ModelCall]] = {}
    for call in calls.order_by("call", "pk"):
        by_run.setdefault(call.run_id or 0, []).append(call)
    # A run with a call that has no captured body (recorded without one) is rebuilt as a whole.
    by_run = {pk: found for pk, found in by_run.items() if all(c.captured for c in found)}
    rows = _rows(conversation)
    views = _rebuilt(conversation, [r for r in run_list if r.pk not in by_run], rows)
    for run in run_list:
        if run.pk in by_run:
            views[run.pk] = [_captured_view(call, rows) for call in by_run[run.pk]]
    return views


def other_requests(conversation: Conversation) -> list[RequestView]:
    """Captured calls made outside a run (summaries for a new conversation)."""
    calls = ModelCall.objects.filter(conversation=conversation, run__isnull=True)
    rows = _rows(conversation)
    return [_captured_view(c, rows) for c in calls.select_related("system", "tools") if c.captured]


def _captured_view(call: ModelCall, rows: Sequence[_Row]) -> RequestView:
    by_seq = {row.seq: row for row in rows}
    body = usage.captured_body(call, rows=[(r.seq, r.stored) for r in rows])
    verified = usage.is_verified(call, body)
    ids: tuple[int, ...] = ()
    if call.messages is None and call.first_seq is not None and call.last_seq is not None:
        skipped = set(call.skipped_seqs or [])
        ids = tuple(
            by_seq[seq].pk
            for seq in range(call.first_seq, call.last_seq + 1)
            if seq in by_seq and seq not in skipped
        )
    notes = []
    if not verified:
        notes.append(
            "This capture no longer matches the digest taken when the request was sent: a stored "
            "row it refers to was changed since."
        )
    return RequestView(
        run_id=call.run_id,
        call=call.call,
        body=body,
        message_ids=ids,
        at=call.started_at.isoformat(),
        notes=tuple(notes),
        captured=True,
        verified=verified,
        model_call=call,
    )


def _rebuilt(
    conversation: Conversation, run_list: list[Run], rows: list[_Row]
) -> dict[int, list[RequestView]]:
    """Requests rebuilt from the rows and today's skills and rules (runs without captures)."""
    if not run_list:
        return {}
    events = list(
        RunEvent.objects.filter(conversation=conversation, type__in=("message", "model.call"))
        .order_by("seq")
        .values("seq", "type", "data", "run_id", "created_at")
    )
    evented = {e["data"].get("message_id") for e in events if e["type"] == "message"}
    tools = default_tools()
    removed = sorted(_removed_by_admin([*tools.names(), SKILL_TOOL]))
    registry = agent_setup.skills_for_conversation(conversation)
    wanted = {r.pk: r for r in run_list}
    invocations = {
        inv.pk: inv
        for inv in SkillInvocation.objects.filter(run_id__in=list(wanted), decision="allowed").only(
            "pk", "run_id", "disallowed_tools", "model_override"
        )
    }
    views: dict[int, list[RequestView]] = {pk: [] for pk in wanted}
    seen: set[int] = set()
    for event in events:
        if event["type"] == "message":
            seen.add(event["data"].get("message_id"))
            continue
        run = wanted.get(event["run_id"])
        if run is None:
            continue
        included = [
            r
            for r in rows
            if r.pk in seen or (r.pk not in evented and r.created_at <= event["created_at"])
        ]
        state = _turn_state(run.pk, included, invocations, removed)
        call = int(event["data"].get("call") or len(views[run.pk]) + 1)
        recorded = _recorded_call(run, call)
        request = compose_request(
            [r.stored for r in included],
            tools=tools.without(removed),
            skills=registry,
            config=agent_setup.agent_config(conversation, model=run.model or None),
            state=state,
        )
        sent_model = recorded.get("model") or event["data"].get("model")
        notes: list[str] = [REBUILT_NOTE]
        if sent_model and sent_model != request.model:
            notes.append(f"Rebuilt model {request.model} differs; the run recorded {sent_model}.")
            request = ModelRequest(
                model=sent_model,
                system=request.system,
                tools=request.tools,
                messages=request.messages,
                max_tokens=request.max_tokens,
            )
        views[run.pk].append(
            RequestView(
                run_id=run.pk,
                call=call,
                body=request.as_kwargs(),
                message_ids=tuple(r.pk for r in included),
                at=str(recorded.get("at") or event["created_at"].isoformat()),
                disallowed_tools=tuple(sorted(state.disallowed_tools)),
                notes=tuple(notes),
            )
        )
    return views


def _rows(conversation: Conversation) -> list[_Row]:
    fields = (
        "pk", "seq", "created_at", "invocation_id", "role", "content", "kind", "is_meta",
        "to_model", "meta",
    )  # fmt: skip
    return [
        _Row(
            pk=pk,
            seq=seq,
            created_at=created_at,
            invocation_id=invocation_id,
            stored=StoredMessage(
                role=role,
                content=tuple(content),
                kind=kind,
                is_meta=is_meta,
                to_model=to_model,
                meta=dict(meta or {}),
            ),
        )
        for pk, seq, created_at, invocation_id, role, content, kind, is_meta, to_model, meta in (
            Message.objects.filter(conversation=conversation).order_by("seq").values_list(*fields)
        )
    ]


def _removed_by_admin(names: list[str]) -> frozenset[str]:
    context = PermissionContext(workspace=settings.WORKSPACE_ROOT, admin_rules=admin_rules())
    return removed_tools(names, context)


def _turn_state(
    run_id: int,
    included: Sequence[_Row],
    invocations: dict[int, SkillInvocation],
    removed: Sequence[str],
) -> TurnState:
    """The run's turn context at this call: admin removals plus what loaded skills applied."""
    state = TurnState()
    state.disallowed_tools.update(removed)
    done: set[int] = set()
    for row in included:
        inv = invocations.get(row.invocation_id) if row.invocation_id else None
        if inv is None or inv.run_id != run_id or inv.pk in done:
            continue
        done.add(inv.pk)
        for text in inv.disallowed_tools or []:
            try:
                rule = parse_rule(text, "deny", source="skill")
            except RuleSyntaxError:
                continue
            if rule.specifier is None:
                state.disallowed_tools.add(rule.tool)
        if inv.model_override:
            state.model_override = inv.model_override
    return state


def _recorded_call(run: Run, call: int) -> dict[str, Any]:
    for item in run.requests or []:
        if isinstance(item, dict) and item.get("call") == call:
            return item
    return {}
