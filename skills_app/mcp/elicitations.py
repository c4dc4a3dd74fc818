"""A server's question mid-call put to the person of the run, in the chat (`elicitation/create`).

`PersonAsker` is the run's ask port (`core.mcp.elicit.Asker`), handed to its MCP tools by the
run's factory. It stores the question (`McpElicitation`), announces the card (`ElicitationAsked`:
which server asks, its message, the form) and waits for the answer any tab gives through
`answer_elicitation` (polling the row, woken at once when the answer arrives in this process).
No answer within MCP_ELICIT_TIMEOUT seconds, or the run stopped, is a cancel. A question that
may not be put to the person (a secret asked for) is stored and shown declined, with why.

The values the person sent go to the server as typed (checked against the form first); the row
keeps them as an mcp__ call's arguments are kept (`preview`: stored secrets masked, hidden text
withheld) once the run has taken them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from skills_app.core.events import ElicitationAnswered, ElicitationAsked, RunEvent
from skills_app.core.mcp.elicit import ElicitAnswer, ElicitQuestion, FormField, checked_values
from skills_app.models import McpElicitation

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.25
ACTIONS = ("accept", "decline", "cancel")

# elicitation id -> event set when an answer arrives in this process (other processes poll).
_WAITERS: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Event]] = {}


class ElicitationError(Exception):
    """An answer that cannot be taken; the message says why."""


def form_of(row: McpElicitation) -> tuple[FormField, ...]:
    """The stored form's fields."""
    names = {f.name for f in dataclasses.fields(FormField)}
    found: list[FormField] = []
    for item in row.fields or []:
        if isinstance(item, dict):
            values = {k: v for k, v in item.items() if k in names}
            values["options"] = tuple(values.get("options") or ())
            found.append(FormField(**values))
    return tuple(found)


@dataclass(slots=True)
class PersonAsker:
    """The ask port of one run: its questions are asked in its conversation."""

    conversation_id: int
    run_id: int
    record: Callable[[RunEvent], Awaitable[int]]
    # The values as the audit keeps them (`visibility.mcp_call_preview` for the server's tools).
    preview: Callable[[str, dict[str, Any]], Any]
    timeout: float = dataclasses.field(default_factory=lambda: float(settings.MCP_ELICIT_TIMEOUT))

    async def __call__(self, question: ElicitQuestion) -> ElicitAnswer:
        fields = [dataclasses.asdict(f) for f in question.fields]
        status = (
            McpElicitation.Status.DECLINE if question.refused else McpElicitation.Status.PENDING
        )
        row = await McpElicitation.objects.acreate(
            conversation_id=self.conversation_id,
            run_id=self.run_id,
            server=question.server,
            message=question.message,
            fields=fields,
            status=status,
            why=question.refused,
            answered_at=timezone.now() if question.refused else None,
        )
        await self.record(
            ElicitationAsked(
                elicitation_id=row.pk,
                server=question.server,
                message=question.message,
                fields=tuple(fields),
                status=status,
                why=question.refused,
            )
        )
        if question.refused:
            return ElicitAnswer("decline", why=question.refused)
        answered = await self._wait(row.pk)
        await self.record(answered_event(answered))
        if answered.status != McpElicitation.Status.ACCEPT:
            return ElicitAnswer(answered.status, why=answered.why)
        values = dict(answered.values or {})
        await sync_to_async(self._keep)(answered.pk, f"mcp__{question.server}", values)
        return ElicitAnswer("accept", values)

    def _keep(self, elicitation_id: int, tool: str, values: dict[str, Any]) -> None:
        """The values as the audit keeps them, once the run has them as typed."""
        kept = self.preview(tool, values)
        McpElicitation.objects.filter(pk=elicitation_id).update(values=kept)

    async def _wait(self, elicitation_id: int) -> McpElicitation:
        loop = asyncio.get_running_loop()
        event = asyncio.Event()
        _WAITERS[elicitation_id] = (loop, event)
        deadline = loop.time() + self.timeout
        try:
            while True:
                row = await McpElicitation.objects.aget(pk=elicitation_id)
                if row.status != McpElicitation.Status.PENDING:
                    return row
                remaining = deadline - loop.time()
                if remaining <= 0:
                    why = f"nobody answered within {self.timeout:g} seconds"
                    await sync_to_async(_close)(elicitation_id, why)
                    return await McpElicitation.objects.aget(pk=elicitation_id)
                try:
                    await asyncio.wait_for(event.wait(), timeout=min(POLL_SECONDS, remaining))
                except TimeoutError:
                    pass
        except asyncio.CancelledError:
            # The run stopped while asking: the question is withdrawn, every tab told so. The
            # SDK's task groups cancel every await of a cancelled scope: shielded. (The run's
            # end cancels what is still pending anyway: `cancel_pending`.)
            with anyio.CancelScope(shield=True):
                try:
                    if await sync_to_async(_close)(elicitation_id, STOPPED):
                        row = await McpElicitation.objects.aget(pk=elicitation_id)
                        await self.record(answered_event(row))
                except Exception:
                    logger.exception("Withdrawing the question %s failed", elicitation_id)
            raise
        finally:
            _WAITERS.pop(elicitation_id, None)


STOPPED = "the run was stopped"
INTERRUPTED = "the run was interrupted: the process running it ended"


def answered_event(row: McpElicitation) -> ElicitationAnswered:
    return ElicitationAnswered(
        elicitation_id=row.pk,
        server=row.server,
        message=row.message,
        status=row.status,
        why=row.why,
        by=row.answered_by_id,
    )


def asked_event(row: McpElicitation) -> ElicitationAsked:
    """The card of a stored question (the chat page shows the pending ones on a reload)."""
    return ElicitationAsked(
        elicitation_id=row.pk,
        server=row.server,
        message=row.message,
        fields=tuple(row.fields or ()),
        status=row.status,
        why=row.why,
    )


def pending_elicitations(conversation_id: int) -> list[McpElicitation]:
    return list(
        McpElicitation.objects.filter(
            conversation_id=conversation_id, status=McpElicitation.Status.PENDING
        )
    )


def cancel_pending(run_id: int, why: str = STOPPED) -> list[McpElicitation]:
    """Cancel the run's unanswered questions (the run ended: nothing waits for them)."""
    with transaction.atomic():
        pending = McpElicitation.objects.select_for_update().filter(
            run_id=run_id, status=McpElicitation.Status.PENDING
        )
        ids = list(pending.values_list("pk", flat=True))
        McpElicitation.objects.filter(pk__in=ids).update(
            status=McpElicitation.Status.CANCEL, why=why, answered_at=timezone.now()
        )
    return list(McpElicitation.objects.filter(pk__in=ids))


def _close(elicitation_id: int, why: str) -> bool:
    """Cancel a question still pending; False when it had been answered."""
    return bool(
        McpElicitation.objects.filter(
            pk=elicitation_id, status=McpElicitation.Status.PENDING
        ).update(status=McpElicitation.Status.CANCEL, why=why, answered_at=timezone.now())
    )


def answer_elicitation(
    elicitation_id: int,
    conversation_id: int,
    user_id: int,
    action: str,
    values: Mapping[str, Any],
) -> McpElicitation:
    """Answer a pending question of this conversation; the first answer wins. Accept's values
    are checked against the question's form (ElicitationError says what is wrong)."""
    if action not in ACTIONS:
        raise ElicitationError(f"Unknown answer {action!r}; use one of {', '.join(ACTIONS)}.")
    with transaction.atomic():
        row = (
            McpElicitation.objects.select_for_update()
            .filter(pk=elicitation_id, conversation_id=conversation_id)
            .first()
        )
        if row is None:
            raise ElicitationError("There is no such question in this conversation.")
        if row.status != McpElicitation.Status.PENDING:
            raise ElicitationError(
                f"This question was already answered ({row.get_status_display()})."
            )
        checked: dict[str, Any] = {}
        if action == "accept":
            try:
                checked = checked_values(form_of(row), values)
            except ValueError as exc:
                raise ElicitationError(str(exc)) from None
        row.status = action
        row.values = checked
        row.answered_by_id = user_id
        row.answered_at = timezone.now()
        row.save(update_fields=["status", "values", "answered_by", "answered_at"])
    waiter = _WAITERS.get(elicitation_id)
    if waiter is not None:
        loop, event = waiter
        loop.call_soon_threadsafe(event.set)
    return row
