"""The chat websocket: relays a conversation's events to one browser tab and takes its actions.

The browser sends JSON: `{"action": "resume", "after": SEQ}` on every (re)connect, and the forms
of the page (htmx `ws-send`) send the actions of `chat.actions` (send, retry, stop, approve,
cancel, edit, regenerate) with their fields, each with an `action_id` the tab made: the
server takes an action once (`chat.receipts`) and acknowledges it after, however many times
the tab sent it (it sends again after a reconnect what was not acknowledged). The
server sends the JSON frames `chat.frames` describes: a stored event's seq, type, announced
fields and HTML for this viewer; streamed text by offset.

Every group message names its event type, and the consumer relays it by the traits its class
declares (`core.events`: stored, streamed, ending streams), with no handler per type. A stored
event arrives as data (`runs.broadcast`: seq, type, data, hidden) and is rendered here, at
the edge, for this tab's viewer (`chat.relay`: a hidden event never for a viewer without the
inspect permission; once per process and visibility class, however many tabs watch). The
database is otherwise read only to resume, to fill a gap in the seqs (the channel layer drops
messages for a full channel, or while Redis is away; a tab's own action may also be announced
after a worker's first events) and to fill a hole in a stream: streamed text is tracked per block by character offset, and every frame's text was
committed before it was sent (`runs.streams`), so a tab that finds a hole reads the text up to
the frame from the database at once and then gets exactly the deltas after it, never a piece
twice, never a hole, and never less text than it showed. When Redis comes back after an outage
the layer tells each consumer (`layer.resumed`) and it catches up the same way.

Sessions follow the account (`accounts/sessions.py`): a tab also joins its user's group, and an
`account.changed` there (a role or permission taken, the user deactivated, a logout) closes it
with ACCOUNT_CHANGED; the page then reloads (chat.js) and is authorised afresh. Every frame the
browser sends is checked against the account and the session first (`_still_allowed`), so no
action runs on an account that changed where no signal told us.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from skills_app import textlog
from skills_app.accounts.sessions import allowed_user, user_group
from skills_app.chat import actions, frames, receipts, relay
from skills_app.chat.actions import MAX_MESSAGE_CHARS, ActionError
from skills_app.chat.event_views import live_frame
from skills_app.chat.fragments import Replayed, replay_html
from skills_app.core.events import EVENT_TYPES
from skills_app.core.events import RunEvent as CoreEvent
from skills_app.models import Conversation, RunEvent
from skills_app.policy.barred import account_barred
from skills_app.runs import recovery
from skills_app.runs.broadcast import group_name
from skills_app.visibility import INSPECT_PERMISSION

logger = logging.getLogger(__name__)

__all__ = ["MAX_MESSAGE_CHARS", "ConversationConsumer"]

MAX_FRAME_BYTES = 64 * 1024
REPLAY_LIMIT = 5_000
REFUSED = 4403
# The account changed (a role or permission taken, deactivated, signed out): reconnect to be
# authorised afresh.
ACCOUNT_CHANGED = 4401

# (run id, model call, block index, kind): one streamed block.
StreamId = tuple[int, int, int, str]


class ConversationConsumer(AsyncWebsocketConsumer):
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
        # Characters of each streamed block this tab has; per run, the last model call whose
        # stream ended in a stored row (a frame of it that arrives late is not news).
        self.known: dict[StreamId, int] = {}
        self.ended: dict[int, int] = {}
        self.group = group_name(self.conversation_id)
        session = self.scope.get("session")
        self.session_key = getattr(session, "session_key", None)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.channel_layer.group_add(user_group(self.user_id), self.channel_name)
        await self.accept()
        # daphne has no start-up hook: the first browser starts this process's sweep for runs of
        # dead workers, so a tab sees "interrupted" within seconds even when no worker is left.
        recovery.ensure_sweeping()

    async def dispatch(self, message: dict[str, Any]) -> None:
        # Channels closes stale database connections before every handler: a hop through the
        # one thread all database work shares, for every message. Streamed text is relayed
        # without the database, and what reads it (rendering a stored event once per process,
        # filling a gap) goes through database_sync_to_async, which checks connections itself;
        # so a run's events go straight to the relay, and no delta waits behind that hop.
        event_class = EVENT_TYPES.get(message.get("type", ""))
        if event_class is not None:
            await self.relay(event_class, message)
        else:
            await super().dispatch(message)

    async def disconnect(self, code: int) -> None:
        # Closing the tab is not a stop: the run goes on and a reconnect resumes from its seq.
        if getattr(self, "group", None):
            await self.channel_layer.group_discard(self.group, self.channel_name)
            await self.channel_layer.group_discard(user_group(self.user_id), self.channel_name)

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
        action = content.get("action")
        if not isinstance(action, str) or action not in ("resume", *actions.ACTIONS):
            await self._error(
                f"Unknown action {action!r}: use one of resume, {', '.join(actions.ACTIONS)}."
            )
            return
        try:
            action_id = receipts.action_id(content.get("action_id"))
        except receipts.ReceiptError as exc:
            await self._error(str(exc))
            return
        allowed, barred = await self._still_allowed(barring=action != "resume")
        if not allowed:
            await self._error(
                "Your account can no longer use this conversation: sign in again.", retry=False
            )
            await self.close(code=REFUSED)
            return
        try:
            if action == "resume":
                await self.resume(content.get("after", 0))
                return
            if barred:
                # A tab opened before a lockout or a deactivation starts nothing more.
                await self._error(barred, retry=False)
                await self.close(code=REFUSED)
                return
            if action_id is not None:
                try:
                    first_time = await self._first_time(action_id, action)
                except receipts.ReceiptError as exc:
                    # Over the per-minute cap: refused in words, acknowledged, not taken.
                    await self._error(str(exc))
                    await self.send(text_data=frames.acknowledged(str(action_id)))
                    return
                if not first_time:
                    # Sent again after a reconnect: it was taken when it first came.
                    await self.send(text_data=frames.acknowledged(str(action_id)))
                    return
            info = await actions.perform(
                action, content, conversation_id=self.conversation_id, user_id=self.user_id
            )
        except ActionError as exc:
            await self._error(str(exc), retry=exc.retry)
        except Exception:
            logger.exception(
                "websocket action %r failed in conversation %s", action, self.conversation_id
            )
            await self._error("Something went wrong on the server. Try again.")
        else:
            # Outside the error handling: the action succeeded whatever happens to this tab now.
            if info:
                await self.send(text_data=frames.status(info))
        if action_id is not None:
            await self.send(text_data=frames.acknowledged(str(action_id)))

    async def resume(self, after: Any) -> None:
        """Send what was stored after `after` and the text of open streams, then go live."""
        if not isinstance(after, int) or isinstance(after, bool) or after < 0:
            await self._error('"after" must be a whole number: the last seq you applied.')
            return
        replayed, streams = await self._replay(after, with_streams=True)
        self.last_sent = max(self.last_sent, after)
        await self._send_replayed(replayed)
        # The tab starts every open stream afresh: offset 0 replaces what it showed, with at least
        # as much (the text was committed before any of it was sent).
        self.known = {}
        for block in streams:
            sid = (block.run_id, block.call, block.index, block.kind)
            await self._send_text(sid, 0, block.text)
            self.known[sid] = len(block.text)
        self.ready = True
        await self.send(text_data=frames.resumed(self.last_sent))

    async def layer_resumed(self, message: dict[str, Any]) -> None:
        """Redis is back (an outage or a restart): send what the group sent meanwhile, from the database."""
        if not self.ready:
            return  # the resume that is under way reads the database anyway
        replayed, streams = await self._replay(self.last_sent, with_streams=True)
        await self._send_replayed(replayed)
        for block in streams:
            sid = (block.run_id, block.call, block.index, block.kind)
            have = self.known.get(sid, 0)
            if len(block.text) > have:
                await self._send_text(sid, have, block.text[have:])
                self.known[sid] = len(block.text)

    # -- events of the conversation's runs ------------------------------------------------------

    async def relay(self, event_class: type[CoreEvent], message: dict[str, Any]) -> None:
        """Send an event of the conversation to this tab, as its class's traits say.

        No handler per type: a stored event goes out with the HTML for this viewer (rendered at
        the edge, `chat.relay`), a piece of streamed text by its offset, another live event as the frame
        the chat makes of it (`event_views`); nothing else needs to know the type.
        """
        data = message["event"]
        if not event_class.stored:
            if event_class.stream:
                await self._delta(data, event_class.stream)
            elif self.ready:
                live = live_frame(event_class.from_data(data))
                if live:
                    await self.send(text_data=live)
            return
        # (Stored pieces of a stream, `text.saved`, are what older event logs hold: nothing
        # sends them now; the tab fills a hole from the live text's journal instead.)
        fresh = await self._stored(message)
        # Only news ends streams: an event announced late (the web process's user message after
        # the worker's first deltas; the tab already filled that gap from the database) is older
        # than the streams the tab follows, and forgetting them restarted a block from offset 0.
        if fresh and event_class.ends_streams and data.get("run_id") is not None:
            self._forget_streams(int(data["run_id"]))  # the rows hold what the run streamed

    # -- the account (the user's group) ------------------------------------------------------

    async def account_changed(self, message: dict[str, Any]) -> None:
        """What this person may do changed: close, so the reconnect is authorised afresh."""
        await self.close(code=ACCOUNT_CHANGED)

    async def _stored(self, message: dict[str, Any]) -> bool:
        """Send a stored event to this tab; False if it had it already (or is not resumed)."""
        seq = int(message["seq"])
        if not self.ready or seq <= self.last_sent:
            return False  # not resumed yet (the replay will include it) or already sent
        if seq > self.last_sent + 1:
            # A gap: the channel layer dropped messages for this tab's full channel. The
            # database has every stored event: send what is missing from there, in order.
            replayed, _ = await self._replay(self.last_sent, with_streams=False)
            await self._send_replayed(replayed)
            self.last_sent = max(self.last_sent, seq)
            return True
        try:
            frame = await relay.frame(self.conversation_id, message, can_inspect=self.can_inspect)
        except Exception:
            # Not marked sent: the next event finds the gap and fills it from the database.
            logger.exception(
                "rendering event #%s of conversation %s failed", seq, self.conversation_id
            )
            return False
        self.last_sent = seq
        if frame:
            await self.send(text_data=frame)
        return True

    async def _send_replayed(self, replayed: list[Replayed]) -> None:
        for event in replayed:
            if event.seq <= self.last_sent:
                continue
            if event.html:
                await self.send(
                    text_data=frames.stored(event.seq, event.type, event.data, event.html)
                )
            self.last_sent = event.seq

    # -- streamed text ---------------------------------------------------------------------------

    async def _delta(self, event: dict[str, Any], kind: str) -> None:
        if not self.ready:
            return  # the resume sends the saved text, and a hole is filled from there
        sid = (int(event["run_id"]), int(event["call"]), int(event["index"]), kind)
        if sid[1] <= self.ended.get(sid[0], -1):
            return
        await self._deliver(sid, int(event["offset"]), str(event["text"]))

    async def _deliver(self, sid: StreamId, offset: int, piece: str) -> None:
        have = self.known.get(sid, 0)
        if offset > have:
            # Text before this piece never reached this tab (a dropped frame, Redis away). It
            # was committed before this piece was sent: read it now.
            saved = await database_sync_to_async(textlog.saved_text)(*sid)
            if len(saved) > have:
                await self._send_text(sid, have, saved[have:])
                self.known[sid] = have = len(saved)
            if offset > have:
                return  # the run ended meanwhile (its stored message holds the text)
        if offset + len(piece) > have:
            await self._send_text(sid, have, piece[have - offset :])
            self.known[sid] = offset + len(piece)

    async def _send_text(self, sid: StreamId, offset: int, piece: str) -> None:
        run_id, call, index, kind = sid
        for start in range(0, len(piece), textlog.LIVE_FRAME_CHARS):
            chunk = piece[start : start + textlog.LIVE_FRAME_CHARS]
            await self.send(text_data=frames.text(kind, run_id, call, index, offset + start, chunk))

    def _forget_streams(self, run_id: int) -> None:
        for sid in [s for s in self.known if s[0] == run_id]:
            self.ended[run_id] = max(self.ended.get(run_id, -1), sid[1])
            del self.known[sid]

    # -- database side ---------------------------------------------------------------------

    @database_sync_to_async
    def _authorise(self, user: Any) -> tuple[bool, bool]:
        owns = Conversation.objects.owned_by(user).filter(pk=self.conversation_id).exists()
        return owns, owns and user.has_perm(INSPECT_PERMISSION)

    @database_sync_to_async
    def _still_allowed(self, *, barring: bool) -> tuple[bool, str]:
        """Whether the account is active, the session still its own and the conversation still
        theirs (the tab's visibility follows the permission as it is now); with `barring`, also
        why the account may not start anything now ("" when it may). One hop for both: under a
        burst of sends, every hop of a consumer waits behind every other consumer's."""
        user = allowed_user(self.user_id, self.session_key)
        if user is None:
            return False, ""
        if not Conversation.objects.owned_by(user).filter(pk=self.conversation_id).exists():
            return False, ""
        self.can_inspect = user.has_perm(INSPECT_PERMISSION)
        return True, account_barred(self.user_id) if barring else ""

    @database_sync_to_async
    def _first_time(self, action_id: uuid.UUID, action: str) -> bool:
        return receipts.record(self.user_id, action_id, action, self.conversation_id)

    @database_sync_to_async
    def _replay(
        self, after: int, *, with_streams: bool
    ) -> tuple[list[Replayed], list[textlog.StreamedBlock]]:
        events = RunEvent.objects.filter(conversation_id=self.conversation_id, seq__gt=after)
        rows = list(events.order_by("seq")[:REPLAY_LIMIT])
        replayed = replay_html(self.conversation_id, rows, can_inspect=self.can_inspect)
        streams = textlog.open_streams(self.conversation_id) if with_streams else []
        return replayed, streams

    async def _error(self, message: str, *, retry: bool = True) -> None:
        await self.send(
            text_data=frames.error(message, retry=retry, conversation_id=self.conversation_id)
        )
