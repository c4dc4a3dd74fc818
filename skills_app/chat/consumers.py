"""The chat websocket: relays a conversation's run events to the browser and takes its actions.

Frames to the browser are JSON. Events carry `seq` (the RunEvent seq) and `type` (the event
type) plus `html` (a rendered partial, or "") and a little data; the client remembers the last
seq it applied and sends `{"action": "resume", "after": seq}` on every (re)connect. Frames that
answer an action and are not events (`type` "error" / "info") carry no seq.

Hidden events and `is_meta` rows are dropped here for users without the inspect permission:
they never leave the server.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.template.loader import render_to_string

from skills_app.chat import conversations as conv
from skills_app.chat import rendering
from skills_app.chat.ratelimit import RateLimitError, check_send
from skills_app.models import Approval, Conversation, Message, RunEvent
from skills_app.permissions.approvals import ApprovalError, answer_approval
from skills_app.runs import recovery
from skills_app.runs import supervisor as runs
from skills_app.runs.store import group_name
from skills_app.visibility import INSPECT_PERMISSION, outbound

logger = logging.getLogger(__name__)


MAX_FRAME_BYTES = 64 * 1024
MAX_MESSAGE_CHARS = 32_000
REPLAY_LIMIT = 5_000
REFUSED = 4403
# Events the browser has no use for; everything else is relayed (filtered for hidden content).
IGNORED = {"audit.tool", "model.call", "block.done", "tool.call"}


class ConversationConsumer(AsyncJsonWebsocketConsumer):
    """One browser tab watching one conversation."""

    conversation_id: int
    user_id: int
    can_inspect: bool
    last_sent: int
    ready: bool

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=REFUSED)
            return
        self.conversation_id = int(self.scope["url_route"]["kwargs"]["conversation_id"])
        self.user_id = user.pk
        allowed, self.can_inspect = await self._authorise(user)
        if not allowed:
            await self.close(code=REFUSED)
            return
        self.last_sent = 0
        self.ready = False
        self.group = group_name(self.conversation_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        # daphne has no start-up hook: the first browser starts this process's sweep for runs of
        # dead workers, so a tab sees "interrupted" within seconds even when no worker is left.
        recovery.ensure_sweeping()

    async def disconnect(self, code: int) -> None:
        # Closing the tab is not a stop: the run goes on and a reconnect resumes from its seq.
        if getattr(self, "group", None):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    # -- from the browser ------------------------------------------------------------------

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        raw = text_data if text_data is not None else (bytes_data or b"").decode("utf-8", "replace")
        if len(raw.encode("utf-8")) > MAX_FRAME_BYTES:
            await self._error(
                f"That frame is too large (the limit is {MAX_FRAME_BYTES // 1024} KB)."
            )
            return
        try:
            content = json.loads(raw)
        except (json.JSONDecodeError, RecursionError):  # RecursionError: absurdly deep nesting
            await self._error("That frame is not valid JSON.")
            return
        if not isinstance(content, dict):
            await self._error('A frame must be a JSON object with an "action".')
            return
        await self.receive_json(content)

    async def receive_json(self, content: dict[str, Any], **kwargs: Any) -> None:
        action = content.get("action")
        handler = {
            "resume": self.do_resume,
            "send": self.do_send,
            "retry": self.do_retry,
            "stop": self.do_stop,
            "approve": self.do_approve,
        }.get(action if isinstance(action, str) else "")
        if handler is None:
            await self._error(
                f"Unknown action {action!r}: use resume, send, retry, stop or approve."
            )
            return
        try:
            await handler(content)
        except Exception:
            logger.exception(
                "websocket action %r failed in conversation %s", action, self.conversation_id
            )
            await self._error("Something went wrong on the server. Try again.")

    async def do_resume(self, content: dict[str, Any]) -> None:
        after = content.get("after", 0)
        if not isinstance(after, int) or isinstance(after, bool) or after < 0:
            await self._error('"after" must be a whole number: the last seq you applied.')
            return
        frames = await self._replay(after)
        self.last_sent = max(self.last_sent, after)
        for frame in frames:
            await self.send_json(frame)
            self.last_sent = max(self.last_sent, frame["seq"])
        self.ready = True
        await self.send_json({"type": "resumed", "last_seq": self.last_sent})

    async def do_send(self, content: dict[str, Any]) -> None:
        text = content.get("text")
        if not isinstance(text, str) or not text.strip():
            await self._error("Type a message first.", retry=False)
            return
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            # A lone surrogate (\ud800) would be stored and then break every later model request.
            await self._error(
                "That message contains characters that are not valid text.", retry=False
            )
            return
        if len(text) > MAX_MESSAGE_CHARS:
            await self._error(
                f"That message is too long ({len(text)} characters; the limit is {MAX_MESSAGE_CHARS}).",
                retry=False,
            )
            return
        await self._start(text)

    async def do_retry(self, content: dict[str, Any]) -> None:
        text = await database_sync_to_async(conv.last_user_text)(self.conversation_id)
        if text is None:
            await self._error("There is no earlier message to send again.", retry=False)
            return
        await self._start(text, retry=True)

    async def _start(self, text: str, *, retry: bool = False) -> None:
        try:
            await database_sync_to_async(check_send)(self.user_id)
            # start_run only creates the task: the loop runs beside this consumer, never inside it.
            await runs.start_run(self.conversation_id, text, user_id=self.user_id, retry=retry)
        except (RateLimitError, runs.RunError) as exc:
            await self._error(str(exc))

    async def do_stop(self, content: dict[str, Any]) -> None:
        run = await database_sync_to_async(conv.active_run)(self.conversation_id)
        if run is None:
            await self.send_json({"type": "info", "message": "Nothing is running."})
            return
        if not await runs.stop_run(run.pk):
            await self._error(
                "This run is executing in another process and could not be stopped from here.",
                retry=False,
            )

    async def do_approve(self, content: dict[str, Any]) -> None:
        approval_id, answer = content.get("approval_id"), content.get("answer")
        reason = content.get("reason") or ""
        if (
            not isinstance(approval_id, int)
            or not isinstance(answer, str)
            or not isinstance(reason, str)
        ):
            await self._error('"approve" needs an approval_id (number) and an answer.', retry=False)
            return
        try:
            await database_sync_to_async(self._answer)(approval_id, answer, reason)
        except ApprovalError as exc:
            await self._error(str(exc), retry=False)

    def _answer(self, approval_id: int, answer: str, reason: str) -> None:
        if not Approval.objects.filter(
            pk=approval_id, conversation_id=self.conversation_id
        ).exists():
            raise ApprovalError("There is no such approval request in this conversation.")
        answer_approval(approval_id, self.user_id, answer, reason=reason)

    # -- from the run (channel layer) ------------------------------------------------------

    async def run_event(self, event: dict[str, Any]) -> None:
        seq = int(event["seq"])
        if not self.ready or seq <= self.last_sent:
            return  # not resumed yet (the replay will include it) or already sent
        if seq > self.last_sent + 1:
            # A gap: the channel layer drops messages when this consumer's channel is full
            # (a slow client), and some events are stored without a broadcast. The database
            # has them all, so send what is missing from there, in order.
            for frame in await self._replay(self.last_sent):
                if frame["seq"] > self.last_sent:
                    await self.send_json(frame)
                    self.last_sent = frame["seq"]
            self.last_sent = max(self.last_sent, seq)
            return
        self.last_sent = seq
        frame = await database_sync_to_async(self._frame)(
            seq, event["event_type"], event.get("data") or {}, bool(event.get("hidden"))
        )
        if frame is not None:
            await self.send_json(frame)

    # -- database side ---------------------------------------------------------------------

    @database_sync_to_async
    def _authorise(self, user: Any) -> tuple[bool, bool]:
        owns = Conversation.objects.owned_by(user).filter(pk=self.conversation_id).exists()
        return owns, owns and user.has_perm(INSPECT_PERMISSION)

    @database_sync_to_async
    def _replay(self, after: int) -> list[dict[str, Any]]:
        events = RunEvent.objects.filter(conversation_id=self.conversation_id, seq__gt=after)
        if not self.can_inspect:
            events = events.filter(hidden=False)
        frames = []
        for event in events.exclude(type__in=IGNORED).order_by("seq")[:REPLAY_LIMIT]:
            frame = self._frame(event.seq, event.type, event.data, event.hidden)
            if frame is not None:
                frames.append(frame)
        return frames

    def _frame(
        self, seq: int, type: str, data: dict[str, Any], hidden: bool
    ) -> dict[str, Any] | None:
        """The browser frame for one event, or None when this viewer gets nothing for it."""
        if type in IGNORED or (hidden and not self.can_inspect):
            return None
        frame: dict[str, Any] = {"seq": seq, "type": type, "html": ""}
        if type == "text.delta":
            frame.update(index=data.get("index", 0), text=data.get("text", ""))
        elif type == "block.start":
            frame.update(
                index=data.get("index", 0),
                block_type=data.get("block_type", ""),
                tool_name=data.get("tool_name") or "",
            )
        elif type == "message":
            return self._message_frame(frame, data)
        elif type == "tool.result":
            tool_use_id = str(data.get("tool_use_id", ""))
            frame.update(tool_use_id=tool_use_id, is_error=bool(data.get("is_error")))
            if data.get("name") != "Skill":
                frame["html"] = rendering.render_tool_result(
                    self.conversation_id, tool_use_id, data, can_inspect=self.can_inspect
                )
        elif type == "skill.invocation":
            tool_use_id = str(data.get("tool_use_id", ""))
            frame.update(
                tool_use_id=tool_use_id,
                skill=data.get("skill", ""),
                decision=data.get("decision", ""),
            )
            if tool_use_id:
                state = {"allowed": "loaded", "denied": "denied"}.get(
                    data.get("decision", ""), "failed"
                )
                frame["html"] = rendering.render_skill_call(
                    tool_use_id,
                    str(data.get("skill", "")),
                    str(data.get("args", "")),
                    state,
                    str(data.get("error", "")),
                    out=outbound(self.conversation_id, can_inspect=self.can_inspect),
                )
        elif type in {"approval.requested", "approval.answered"}:
            approval = (
                Approval.objects.select_related("answered_by")
                .filter(pk=data.get("approval_id"), conversation_id=self.conversation_id)
                .first()
            )
            if approval is None:
                return None
            frame.update(approval_id=approval.pk, status=approval.status)
            frame["html"] = rendering.render_approval(approval, can_inspect=self.can_inspect)
        elif type == "run.started":
            frame.update(
                run_id=data.get("run_id"), demo=bool(data.get("demo")), label=data.get("label", "")
            )
        elif type == "run.queued":
            frame.update(run_id=data.get("run_id"))
            frame["html"] = render_to_string(
                "skills_app/chat/_run_queued.html", {"run_id": data.get("run_id")}
            )
        elif type == "run.finished":
            frame.update(
                run_id=data.get("run_id"), status=data.get("status", ""), kind=data.get("kind", "")
            )
            if data.get("status") == "stopped":
                frame["html"] = rendering.render_notice("Stopped.", kind="notice", retry=False)
        else:
            return (
                None  # an event type this client does not know: relay nothing rather than raw data
            )
        return frame

    def _message_frame(self, frame: dict[str, Any], data: dict[str, Any]) -> dict[str, Any] | None:
        row = (
            Message.objects.select_related("run", "invocation")
            .filter(pk=data.get("message_id"), conversation_id=self.conversation_id)
            .first()
        )
        if row is None or (row.is_meta and not self.can_inspect):
            return None
        ctx: dict[str, Any] = {}
        if row.role == "assistant" and row.kind in rendering.ASSISTANT_CONTENT_KINDS:
            ctx = conv.transcript_context(row.conversation, [row], can_inspect=self.can_inspect)
        frame.update(message_id=row.pk, role=row.role, kind=row.kind)
        frame["html"] = rendering.render_message(row, can_inspect=self.can_inspect, ctx=ctx)
        if row.kind == "skill_status" and row.invocation is not None and row.invocation.tool_use_id:
            frame["replaces"] = f"skill-{row.invocation.tool_use_id}"
        return frame

    async def _error(self, message: str, *, retry: bool = True) -> None:
        await self.send_json(
            {
                "type": "error",
                "message": message,
                "html": rendering.render_notice(message, retry=retry),
            }
        )
