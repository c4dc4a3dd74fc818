"""Every model call the app makes goes through one seam: `metered` admits it under the person's
policy, records it as a `ModelCall` row, streams it and settles it.

A run's calls (`ports.ServicePorts.call_model`), titles and summaries
(`chat.summaries.recorded_call`) and trigger attempts (`triggers.executor`) stream through it.
The policy admits the call before anything is sent (`CallRefused`; room set aside in the budget),
the row captures its request, and as the stream ends both are settled: the usage and the cost
when `MessageDone` arrives; otherwise the kind of failure (an API error, a cut stream, a stop, a
failure of ours). An error answer costs nothing; a cut, a stop or a failure of ours may have been
billed, so the room set aside for it is spent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from asgiref.sync import sync_to_async

from skills_app.core.events import MessageDone, ModelEvent
from skills_app.core.llm import ModelError, ModelRequest
from skills_app.models import ModelCall
from skills_app.runs import usage
from skills_app.runs.spending import Spending

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CallRow:
    """Where a call's `ModelCall` row goes (`usage.start_call`)."""

    conversation_id: int
    run_id: int | None
    call: int
    skill: str = ""
    # The messages were built from the conversation's model-bound rows (a run's own calls);
    # otherwise (a subagent, a summary) they are stored verbatim.
    from_rows: bool = True
    purpose: str = ModelCall.TURN


def failure(exc: BaseException) -> tuple[str, bool]:
    """How a call that ended with `exc` is recorded, and whether it may have been billed."""
    if isinstance(exc, ModelError):
        return exc.kind, exc.kind == "stream_cut"
    if isinstance(exc, asyncio.CancelledError | GeneratorExit):
        return "stopped", True
    return "internal", True


async def metered(
    request: ModelRequest,
    events: AsyncIterator[ModelEvent],
    *,
    spending: Spending | None,
    row: CallRow | None = None,
    is_demo: bool = False,
) -> AsyncIterator[ModelEvent]:
    """`events` (the stream of `request`, not started yet), admitted, recorded and settled.

    Raises CallRefused before `events` starts when the policy refuses the call; ModelError, a
    cancellation or any other failure goes on up once the call is settled. With no `row`, no
    `ModelCall` row is written (a trigger attempt); with no `spending`, nothing is admitted.
    """
    ticket = await spending.admit(request) if spending is not None else None
    call_id: int | None = None
    ended = False
    try:
        if row is not None:
            call_id = await sync_to_async(usage.start_call)(
                conversation_id=row.conversation_id,
                run_id=row.run_id,
                call=row.call,
                request=request,
                skill=row.skill,
                is_demo=is_demo,
                from_rows=row.from_rows,
                purpose=row.purpose,
            )
        async for event in events:
            if isinstance(event, MessageDone):
                ended = True
                if call_id is not None:
                    await sync_to_async(usage.finish_call)(call_id, event.message, is_demo=is_demo)
                if spending is not None:
                    await spending.settle(ticket, message=event.message, model=request.model)
            yield event
    except BaseException as exc:
        if not ended:
            kind, maybe_billed = failure(exc)
            await _failed(call_id, kind)
            if spending is not None:
                await spending.settle(ticket, unknown=maybe_billed)
        raise
    if not ended:
        # The stream ended without the whole message: whoever reads it says the answer was cut.
        await _failed(call_id, "stream_cut")
        if spending is not None:
            await spending.settle(ticket, unknown=True)


async def _failed(call_id: int | None, kind: str) -> None:
    if call_id is None:
        return
    try:
        await sync_to_async(usage.fail_call)(call_id, kind)
    except Exception:  # the call's failure matters more than its bookkeeping
        logger.exception("could not record the end of model call %s", call_id)


__all__ = ["CallRow", "failure", "metered"]
