"""Model calls as rows: what each call was sent (captured when it starts) and what it used.

The capture stores the request body exactly as the adapter sends it (`ModelRequest.as_kwargs`):
the system prompt and the tools by digest in `RequestPart`, the other fields as options, and the
messages as the range of stored rows they were built from (or verbatim when no range tells them).
`captured_body` rebuilds the body; `body_digest` of the rebuild equals the digest taken at send
time, which `is_verified` checks.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import replace
from decimal import Decimal
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from skills_app.core.caching import with_cache_breakpoints
from skills_app.core.context_window import PreviousCall, prefix_chars
from skills_app.core.llm import ModelRequest
from skills_app.core.pricing import USAGE_FIELDS, cost_usd
from skills_app.core.transcript import StoredMessage, to_api_messages, with_exclusion
from skills_app.models import Message, ModelCall, RequestPart

logger = logging.getLogger(__name__)

_BODY_PARTS = ("model", "max_tokens", "messages", "system", "tools")


def canonical_json(value: Any) -> str:
    """JSON with sorted keys: the same text however a database stored the object."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def body_digest(body: dict[str, Any]) -> str:
    """sha256 of a request body (key order aside: JSON objects have none)."""
    return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


def _part(kind: str, content: Any) -> RequestPart | None:
    if content is None:
        return None
    digest = hashlib.sha256(f"{kind}\n{canonical_json(content)}".encode()).hexdigest()
    found = RequestPart.objects.filter(digest=digest).first()
    if found is not None:
        return found
    try:
        with transaction.atomic():
            return RequestPart.objects.create(digest=digest, kind=kind, content=content)
    except IntegrityError:  # another process stored the same part just now
        return RequestPart.objects.get(digest=digest)


def _as_sent(row: StoredMessage) -> StoredMessage:
    """A row of a captured range as it was sent: exclusions made later do not apply."""
    return replace(with_exclusion(row, None), to_model=True)


def _stored_rows(
    conversation_id: int, *, upto: int | None = None
) -> list[tuple[int, StoredMessage]]:
    rows = Message.objects.filter(conversation_id=conversation_id).order_by("seq")
    if upto is not None:
        rows = rows.filter(seq__lte=upto)
    fields = ("seq", "role", "content", "kind", "is_meta", "to_model", "meta")
    return [
        (seq, StoredMessage(role, tuple(content), kind, is_meta, to_model, dict(meta or {})))
        for seq, role, content, kind, is_meta, to_model, meta in rows.values_list(*fields)
    ]


def _assemble(
    options: dict[str, Any],
    messages: list[dict[str, Any]],
    system: Any,
    tools: Any,
) -> dict[str, Any]:
    """A body in the order `ModelRequest.as_kwargs` builds it."""
    body: dict[str, Any] = {
        "model": options["model"],
        "max_tokens": options["max_tokens"],
        "messages": messages,
    }
    if system:
        body["system"] = system
    if tools:
        body["tools"] = tools
    body.update({k: v for k, v in options.items() if k not in _BODY_PARTS})
    return body


def _range_messages(
    rows: list[tuple[int, StoredMessage]],
    first: int | None,
    last: int | None,
    skipped: list[int],
    *,
    cache: bool,
    system: Any,
    tools: Any,
) -> list[dict[str, Any]]:
    if first is None or last is None:
        return []
    gone = set(skipped)
    sent = [_as_sent(row) for seq, row in rows if first <= seq <= last and seq not in gone]
    messages = to_api_messages(sent)
    if cache:
        _tools, _system, messages = with_cache_breakpoints(tools or [], system or [], messages)
    return messages


def _locate(
    rows: list[tuple[int, StoredMessage]], body: dict[str, Any], cache: bool
) -> tuple[int | None, int | None, list[int]] | None:
    """The range of rows the body's messages were built from, or None when no range tells them."""
    sent = [(seq, row) for seq, row in rows if row.sent_to_model]
    if not sent:
        return (None, None, []) if not body["messages"] else None
    first, last = sent[0][0], sent[-1][0]
    kept = {seq for seq, _row in sent}
    skipped = [seq for seq, _row in rows if first <= seq <= last and seq not in kept]
    rebuilt = _range_messages(
        rows, first, last, skipped, cache=cache, system=body.get("system"), tools=body.get("tools")
    )
    return (first, last, skipped) if rebuilt == body["messages"] else None


def start_call(
    *,
    conversation_id: int,
    run_id: int | None,
    call: int,
    request: ModelRequest,
    skill: str = "",
    is_demo: bool = False,
    from_rows: bool = True,
    purpose: str = ModelCall.TURN,
) -> int:
    """Store the call as it starts, with its request captured; the ModelCall id.

    from_rows: the messages were built from this conversation's model-bound rows (a run's own
    calls); otherwise (a subagent, a summary) they are stored verbatim.
    """
    body = request.as_kwargs()
    located = None
    if from_rows:
        located = _locate(_stored_rows(conversation_id), body, request.cache)
    if located is None:
        first = last = None
        skipped: list[int] = []
        verbatim: list[dict[str, Any]] | None = body["messages"]
    else:
        first, last, skipped = located
        verbatim = None
    options = {k: v for k, v in body.items() if k not in ("messages", "system", "tools")}
    row = ModelCall.objects.create(
        conversation_id=conversation_id,
        run_id=run_id,
        call=call,
        purpose=purpose,
        requested_model=request.model,
        # Until the answer names the model that answered.
        model="demo" if is_demo else request.model,
        is_demo=is_demo,
        skill=skill[:200],
        system=_part(RequestPart.SYSTEM, body.get("system")),
        tools=_part(RequestPart.TOOLS, body.get("tools")),
        options=options,
        first_seq=first,
        last_seq=last,
        skipped_seqs=skipped,
        cache_breakpoints=request.cache,
        messages=verbatim,
        body_digest=body_digest(body),
        message_count=len(request.messages),
        prefix_chars=prefix_chars(request),
    )
    return row.pk


def finish_call(call_id: int, message: dict[str, Any], *, is_demo: bool = False) -> None:
    """Record the usage, the cost and the stop reason of a call that answered."""
    row = ModelCall.objects.get(pk=call_id)
    reported = message.get("usage")
    usage: dict[str, Any] = reported if isinstance(reported, dict) else {}
    model = "demo" if is_demo else str(message.get("model") or row.requested_model)
    try:
        cost: Decimal | None = cost_usd(model, usage, on=timezone.localdate())
    except ValueError:
        logger.warning("model call %s reported usage that is not token counts: %r", call_id, usage)
        cost, usage = None, {}
    counts = {}
    for key in USAGE_FIELDS:
        value = usage.get(key)
        counts[key] = value if isinstance(value, int) and not isinstance(value, bool) else 0
    ModelCall.objects.filter(pk=call_id).update(
        model=model[:100],
        usage=usage,
        cost_usd=cost,
        stop_reason=str(message.get("stop_reason") or "")[:40],
        finished_at=timezone.now(),
        **counts,
    )


def fail_call(call_id: int, kind: str) -> None:
    """Record that a call ended without an answer (an API error, a cut stream, a stop)."""
    ModelCall.objects.filter(pk=call_id, finished_at=None).update(
        error_kind=kind[:40], finished_at=timezone.now()
    )


def captured_body(
    call: ModelCall, *, rows: list[tuple[int, StoredMessage]] | None = None
) -> dict[str, Any]:
    """The request body the call sent, rebuilt from its capture.

    rows: the conversation's (seq, row) pairs when the caller has read them already.
    """
    system = call.system.content if call.system is not None else None
    tools = call.tools.content if call.tools is not None else None
    if call.messages is not None:
        messages = call.messages
    else:
        if rows is None:
            rows = _stored_rows(call.conversation_id, upto=call.last_seq)
        messages = _range_messages(
            rows,
            call.first_seq,
            call.last_seq,
            list(call.skipped_seqs or []),
            cache=call.cache_breakpoints,
            system=system,
            tools=tools,
        )
    return _assemble(dict(call.options), messages, system, tools)


def is_verified(call: ModelCall, body: dict[str, Any]) -> bool:
    """The rebuilt body is the one sent (its digest matches the one taken at send time)."""
    return bool(call.body_digest) and body_digest(body) == call.body_digest


def previous_call(conversation_id: int) -> PreviousCall | None:
    """The conversation's last answered call of its own runs, to estimate the next request."""
    row = (
        ModelCall.objects.filter(
            conversation_id=conversation_id,
            purpose=ModelCall.TURN,
            run__parent__isnull=True,
            finished_at__isnull=False,
            error_kind="",
        )
        .order_by("-started_at", "-pk")
        .first()
    )
    if row is None or not row.usage:
        return None
    return PreviousCall(
        usage=row.usage, message_count=row.message_count, prefix_chars=row.prefix_chars
    )
