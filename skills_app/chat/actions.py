"""What a person can do in a conversation: send (or queue), retry, stop, answer an approval,
cancel a queued message, edit their latest message, regenerate the latest answer.

The websocket (forms sent with htmx's `ws-send`) and the plain POST of a page without JavaScript
post the same fields (`action` plus its own) and reach the same checks here, so both refuse the
same things with the same words.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from channels.db import database_sync_to_async

from skills_app.chat import conversations as conv
from skills_app.chat import titles
from skills_app.core.events import TurnExcluded
from skills_app.mcp.elicitations import ElicitationError, answer_elicitation
from skills_app.models import Approval, Run, RunEvent
from skills_app.permissions.approvals import ApprovalError, answer_approval
from skills_app.runs import attached, eventlog, pending, store
from skills_app.runs import supervisor as runs
from skills_app.runs.broadcast import broadcast_events

MAX_MESSAGE_CHARS = 32_000
ACTIONS = ("send", "retry", "stop", "approve", "elicit", "cancel", "edit", "regenerate")
# The form fields of a server's question (`elicit`) are sent as "value.<field name>".
VALUE_PREFIX = "value."


class ActionError(Exception):
    """The action cannot be taken; the message says why, `retry` whether Retry may help."""

    def __init__(self, message: str, *, retry: bool = True) -> None:
        super().__init__(message)
        self.retry = retry


async def perform(
    action: str, fields: Mapping[str, Any], *, conversation_id: int, user_id: int
) -> str:
    """Take one action for the conversation's owner; what to tell them ("" when nothing)."""
    if action == "send":
        try:
            files = attached.attachment_ids(fields.get("attachments"))
        except attached.AttachmentError as exc:
            raise ActionError(str(exc), retry=False) from None
        await _send(conversation_id, user_id, message_text(fields.get("text")), files)
    elif action == "retry":
        text = await database_sync_to_async(conv.last_user_text)(conversation_id)
        if text is None:
            raise ActionError("There is no earlier message to send again.", retry=False)
        await _start(conversation_id, user_id, text, retry=True)
    elif action == "stop":
        return await _stop(conversation_id)
    elif action == "approve":
        await _approve(conversation_id, user_id, fields)
    elif action == "elicit":
        await _elicit(conversation_id, user_id, fields)
    elif action == "cancel":
        await _cancel(conversation_id, fields)
    elif action == "edit":
        text = message_text(fields.get("text"))
        await _replace(
            conversation_id, user_id, "edit", text, _whole_number(fields.get("message_id"))
        )
    elif action == "regenerate":
        await _replace(conversation_id, user_id, "regenerate", None, None)
    else:
        raise ActionError(f"Unknown action {action!r}: use one of {', '.join(ACTIONS)}.")
    return ""


def message_text(text: Any) -> str:
    """The message as typed, or ActionError saying what is wrong with it."""
    if not isinstance(text, str) or not text.strip():
        raise ActionError("Type a message first.", retry=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (\ud800) would be stored and then break every later model request.
        raise ActionError(
            "That message contains characters that are not valid text.", retry=False
        ) from None
    if len(text) > MAX_MESSAGE_CHARS:
        raise ActionError(
            f"That message is too long ({len(text)} characters; the limit is {MAX_MESSAGE_CHARS}).",
            retry=False,
        )
    return text


async def _start(
    conversation_id: int,
    user_id: int,
    text: str | None,
    *,
    retry: bool = False,
    attachments: list[int] | None = None,
    prepare: runs.Prepare | None = None,
) -> None:
    try:
        # start_run only creates the task: the loop runs beside the caller, never inside it.
        # The limits are checked once, where the run is created (one step: parallel tabs cannot
        # all pass on the same count).
        await runs.start_run(
            conversation_id,
            text,
            user_id=user_id,
            retry=retry,
            attachments=attachments or (),
            within_limits=1,
            prepare=prepare,
        )
    except runs.RunError as exc:
        raise ActionError(str(exc)) from None


async def _send(conversation_id: int, user_id: int, text: str, files: list[int]) -> None:
    """Start a run, or queue the message while one is busy (it is sent when that run ends).

    A message with files is not queued: it starts now or is refused, and its files stay
    attached in the composer for the next try.
    """
    if files:
        if await database_sync_to_async(conv.active_run)(conversation_id) is not None:
            raise ActionError(
                "An answer is being written: your message and its files stay here; send them "
                "when it is finished, or stop it first.",
                retry=False,
            )
        await _start(conversation_id, user_id, text, attachments=files)
        return
    try:
        events = await database_sync_to_async(pending.queue_if_busy)(conversation_id, user_id, text)
    except pending.QueueError as exc:
        raise ActionError(str(exc), retry=False) from None
    if events is None:
        await _start(conversation_id, user_id, text)
        return
    await broadcast_events(events)
    # A queue left behind by a run that ended without draining it (its process died) moves now.
    await send_queued(conversation_id)


async def send_queued(conversation_id: int) -> None:
    """Send the oldest queued message if nothing runs (after every run, stop or queueing)."""
    await pending.send_next(conversation_id, start=runs.start_run)


async def _cancel(conversation_id: int, fields: Mapping[str, Any]) -> None:
    queued_id = _whole_number(fields.get("queued_id"))
    if queued_id is None:
        raise ActionError('"cancel" needs a queued_id (number).', retry=False)
    try:
        events = await database_sync_to_async(pending.cancel)(conversation_id, queued_id)
    except pending.QueueError as exc:
        raise ActionError(str(exc), retry=False) from None
    await broadcast_events(events)


async def _replace(
    conversation_id: int, user_id: int, how: str, text: str | None, message_id: int | None
) -> None:
    """Edit the latest message (`text`) or regenerate the latest answer; the old turn stays.

    The turn is replaced in the transaction that creates the new run, after the limits are
    checked there: a refused edit or regeneration leaves the conversation as it was."""
    if await database_sync_to_async(conv.active_run)(conversation_id) is not None:
        raise ActionError(
            "An answer is being written: wait for it or stop it, then "
            + ("edit your message." if how == "edit" else "regenerate."),
            retry=False,
        )

    def replaced() -> list[RunEvent]:
        try:
            ids = store.replace_latest(conversation_id, how, message_id=message_id)
        except ValueError as exc:
            # Said as a run's refusal: runs reports it so, whenever it calls this.
            raise runs.RunError(str(exc)) from None
        if how == "edit":
            titles.forget_auto_title(conversation_id, message_id)
        event = TurnExcluded(reason="replaced", message_ids=tuple(store.visible_ids(ids)))
        return [eventlog.append_event(conversation_id, event)]

    try:
        await _start(conversation_id, user_id, text, retry=text is None, prepare=replaced)
    except ActionError as exc:
        # Retry would send the last message again, not this edit or regeneration: the refusal
        # offers none and says what to do instead.
        again = "edit your message again" if how == "edit" else "regenerate again"
        raise ActionError(str(exc).replace("press Retry", again), retry=False) from None


async def _stop(conversation_id: int) -> str:
    run = await database_sync_to_async(conv.active_run)(conversation_id)
    if run is None:
        return "Nothing is running."
    if not await runs.stop_run(run.pk):
        raise ActionError(
            "This run is executing in another process and could not be stopped from here.",
            retry=False,
        )
    if run.status == Run.QUEUED:
        # A run stopped before any process took it ends no task that would send the queue.
        await send_queued(conversation_id)
    return ""


async def _approve(conversation_id: int, user_id: int, fields: Mapping[str, Any]) -> None:
    approval_id, answer = _whole_number(fields.get("approval_id")), fields.get("answer")
    reason = fields.get("reason") or ""
    if approval_id is None or not isinstance(answer, str) or not isinstance(reason, str):
        raise ActionError('"approve" needs an approval_id (number) and an answer.', retry=False)
    try:
        await database_sync_to_async(_answer)(conversation_id, user_id, approval_id, answer, reason)
    except ApprovalError as exc:
        raise ActionError(str(exc), retry=False) from None


async def _elicit(conversation_id: int, user_id: int, fields: Mapping[str, Any]) -> None:
    """The person's answer to a server's question: accept (with the form's values), decline or
    cancel; a value that does not fit the form is said, and the question stays open."""
    elicitation_id, answer = _whole_number(fields.get("elicitation_id")), fields.get("answer")
    if elicitation_id is None or not isinstance(answer, str):
        raise ActionError('"elicit" needs an elicitation_id (number) and an answer.', retry=False)
    values = {
        key.removeprefix(VALUE_PREFIX): value
        for key, value in fields.items()
        if isinstance(key, str) and key.startswith(VALUE_PREFIX)
    }
    try:
        await database_sync_to_async(answer_elicitation)(
            elicitation_id, conversation_id, user_id, answer, values
        )
    except ElicitationError as exc:
        raise ActionError(str(exc), retry=False) from None


def _answer(conversation_id: int, user_id: int, approval_id: int, answer: str, reason: str) -> None:
    if not Approval.objects.filter(pk=approval_id, conversation_id=conversation_id).exists():
        raise ApprovalError("There is no such approval request in this conversation.")
    answer_approval(approval_id, user_id, answer, reason=reason)


def _whole_number(value: Any) -> int | None:
    """An id from JSON (a number) or from a form (digits); None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 18:
        return int(value)
    return None
