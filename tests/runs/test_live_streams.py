"""Live text: committed in batches, then sent, and whole in every tab whatever the timing.

A run's recorder is driven directly here (its deltas at chosen moments), and tabs connect at
different points of the stream: before it, mid-stream, right after a flush, with the channel
layer dropping live frames, with the database away for a while. Each tab must assemble exactly
the streamed text (`Reader` fails on a hole or a repeated piece), without the database per frame,
and no frame may carry text the database does not hold yet.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
import time
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.db import OperationalError, connections
from django.test import Client

from skills_app import textlog
from skills_app.core.events import (
    ConversationTitled,
    MessageStored,
    ModelCalled,
    TextDelta,
    ThinkingDelta,
)
from skills_app.core.transcript import StoredMessage
from skills_app.models import Conversation, Message, Run, RunEvent, StreamPiece
from skills_app.runs import broadcast, eventlog, store, streams
from skills_app.runs.recorder import RunRecorder
from skills_app.runs.streams import LIVE_INTERVAL, LIVE_MAX_INTERVAL, journal
from skills_app.textlog import LIVE_FRAME_CHARS
from tests.support.loop_helpers import wait_until, watch_group
from tests.support.ws_helpers import Reader, receive, until
from webapp.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = (b"origin", b"http://127.0.0.1")
WORDS = [f"word{i:03d} " for i in range(120)]
TEXT = "".join(WORDS)


def _cookie(user: Any) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


async def _tab(user: Any, conversation_id: int) -> tuple[WebsocketCommunicator, list[dict]]:
    cookie = await sync_to_async(_cookie)(user)
    tab = WebsocketCommunicator(
        application,
        f"/ws/conversations/{conversation_id}/",
        headers=[ORIGIN, (b"cookie", f"sessionid={cookie}".encode())],
    )
    connected, _ = await tab.connect(timeout=10)
    assert connected
    await tab.send_json_to({"action": "resume", "after": 0})
    return tab, await until(tab, lambda f: f["type"] == "resumed")


async def _read_until(
    tab: WebsocketCommunicator, frames: list[dict], done: Any, timeout: float = 5.0
) -> None:
    """Read frames into `frames` until done(Reader) holds; fail after `timeout` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not done(Reader().apply(frames)):
        left = deadline - loop.time()
        assert left > 0, f"the tab has {Reader().apply(frames).blocks!r}"
        try:
            frames.append(await receive(tab, timeout=min(left, 0.5)))
        except TimeoutError:
            continue


@pytest.fixture
async def recorder(alice) -> RunRecorder:
    conversation = await Conversation.objects.acreate(owner=alice, title="live")
    run = await Run.objects.acreate(conversation=conversation, status=Run.RUNNING)
    recorder = RunRecorder(conversation.pk, run.pk, alice.pk)
    await recorder.event(ModelCalled(call=1, model="claude-test"))
    yield recorder
    recorder.streams.close()


async def _stream(recorder: RunRecorder, words: list[str], pause: float = 0.0) -> None:
    for word in words:
        await recorder.event(TextDelta(0, word))
        if pause:
            await asyncio.sleep(pause)


@pytest.mark.parametrize(
    "moment", ["before", "mid-stream", "after-a-flush", "connected-resumed-late"]
)
async def test_a_tab_gets_the_whole_text_once_whenever_it_connects(recorder, alice, moment):
    conversation_id = recorder.conversation_id
    tab = None
    if moment == "before":
        tab, frames = await _tab(alice, conversation_id)
    await _stream(recorder, WORDS[:40], pause=0.002)
    if moment == "mid-stream":
        tab, frames = await _tab(alice, conversation_id)
    if moment == "after-a-flush":
        await recorder.flush()
        tab, frames = await _tab(alice, conversation_id)
        assert Reader().apply(frames).text() == "".join(WORDS[:40])  # the saved text first
    if moment == "connected-resumed-late":
        cookie = await sync_to_async(_cookie)(alice)
        tab = WebsocketCommunicator(
            application,
            f"/ws/conversations/{conversation_id}/",
            headers=[ORIGIN, (b"cookie", f"sessionid={cookie}".encode())],
        )
        assert (await tab.connect(timeout=10))[0]
    await _stream(recorder, WORDS[40:80], pause=0.002)
    if moment == "connected-resumed-late":
        # In the group since connect, but live frames before its resume are not for it.
        await tab.send_json_to({"action": "resume", "after": 0})
        frames = await until(tab, lambda f: f["type"] == "resumed")
    await _stream(recorder, WORDS[80:], pause=0.002)
    await recorder.flush()
    await _read_until(tab, frames, lambda reader: reader.text() == TEXT)
    assert Reader().apply(frames).text() == TEXT
    await tab.disconnect()


async def test_live_frames_the_channel_layer_dropped_are_filled_from_the_database_at_once(
    recorder, alice, monkeypatch
):
    tab, frames = await _tab(alice, recorder.conversation_id)
    sent, real_send_live = [], broadcast.send_live

    async def lossy(conversation_id, event):
        sent.append(event)
        if len(sent) % 3 != 2:  # every third frame is lost on a full channel
            await real_send_live(conversation_id, event)

    monkeypatch.setattr(broadcast, "send_live", lossy)
    await _stream(recorder, WORDS[:-1], pause=0.003)
    await recorder.flush()
    assert len(sent) >= 3, "the stream was too fast to lose a frame"
    # The next frame that arrives shows the tab its hole (a lost last frame is shown by the
    # stored message that follows it).
    monkeypatch.setattr(broadcast, "send_live", real_send_live)
    await _stream(recorder, WORDS[-1:])
    await recorder.flush()
    await _read_until(tab, frames, lambda reader: reader.text() == TEXT)
    await tab.disconnect()


def _store_user_message(conversation_id: int, run_id: int) -> RunEvent:
    row = store.append_message(conversation_id, StoredMessage.text("user", "hello"), run_id=run_id)
    return eventlog.append_event(
        conversation_id, "message", eventlog.message_event(row), run_id=run_id
    )


async def test_an_event_announced_late_by_another_process_does_not_restart_a_stream(
    recorder, alice
):
    # The web process stores the user's message and announces it; a worker may run the run and
    # announce its first events before that announcement arrives. The tab fills the gap from
    # the database, so the late message.stored is old news: it must not make the tab forget
    # the stream it is following (which sent the saved text again from offset 0, and held the
    # live frames back until the next save).
    tab, frames = await _tab(alice, recorder.conversation_id)
    late = await sync_to_async(_store_user_message)(recorder.conversation_id, recorder.run_id)
    await _stream(recorder, WORDS[:40])
    await recorder.flush()
    # A stored event after the unannounced one: the tab fills its gap from the database.
    await recorder.record(ModelCalled(call=1, model="claude-test"))
    await _read_until(tab, frames, lambda reader: reader.text() == "".join(WORDS[:40]))
    await broadcast.broadcast_events([late])
    await _stream(recorder, WORDS[40:80])
    await recorder.flush()
    await _read_until(tab, frames, lambda reader: reader.text() == "".join(WORDS[:80]))
    await _stream(recorder, WORDS[80:])
    await recorder.flush()
    await _read_until(tab, frames, lambda reader: reader.text() == TEXT)
    starts = [f for f in frames if f["type"] == "text.delta" and f["offset"] == 0]
    assert len(starts) == 1, f"the block was sent from its start {len(starts)} times"
    await tab.disconnect()


async def test_thinking_streams_into_its_own_block_before_the_text(recorder, alice):
    tab, frames = await _tab(alice, recorder.conversation_id)
    thought = "Weighing the two options. " * 5
    for i in range(0, len(thought), 7):
        await recorder.event(ThinkingDelta(0, thought[i : i + 7]))
    await recorder.event(TextDelta(1, "The answer."))
    await recorder.flush()
    await _read_until(
        tab, frames, lambda r: r.text("thinking.delta") == thought and r.text() == "The answer."
    )
    kinds = [f["type"] for f in frames if f["type"].endswith(".delta")]
    assert kinds.index("thinking.delta") < kinds.index("text.delta")
    await tab.disconnect()


async def test_no_frame_carries_more_than_the_frame_limit(recorder, alice):
    huge = "é" * (2 * LIVE_FRAME_CHARS + 123)
    async with watch_group(recorder.conversation_id) as seen:
        await recorder.event(TextDelta(0, huge))
        await recorder.flush()
    live = [m["event"] for m in seen if m["type"] == "text.delta"]
    assert [len(e["text"]) for e in live] == [LIVE_FRAME_CHARS, LIVE_FRAME_CHARS, 123]
    assert [e["offset"] for e in live] == [0, LIVE_FRAME_CHARS, 2 * LIVE_FRAME_CHARS]
    # A tab that arrives later gets the saved text in pieces of the same size.
    tab, frames = await _tab(alice, recorder.conversation_id)
    texts = [f for f in frames if f["type"] == "text.delta"]
    assert max(len(f["text"].encode()) for f in texts) <= 64 * 1024
    assert Reader().apply(frames).text() == huge
    await tab.disconnect()


async def test_no_frame_leaves_before_its_text_is_in_the_database(recorder, monkeypatch):
    """A tab never shows text the database lacks: a process killed right after a frame went out
    keeps (as its partial answer) at least everything that frame showed."""
    checked, real_send_live = [], broadcast.send_live

    async def checking(conversation_id, event):
        saved = await sync_to_async(textlog.saved_text)(
            event.run_id, event.call, event.index, "text"
        )
        checked.append(len(saved) >= event.offset + len(event.text))
        await real_send_live(conversation_id, event)

    monkeypatch.setattr(broadcast, "send_live", checking)
    await _stream(recorder, WORDS, pause=0.002)
    await recorder.flush()
    assert len(checked) >= 3 and all(checked), checked
    assert await sync_to_async(textlog.streamed_text)(recorder.run_id) == [
        {"index": 0, "text": TEXT}
    ]


async def test_the_journal_commits_every_streaming_run_in_one_transaction(alice, monkeypatch):
    recorders = []
    for i in range(3):
        conversation = await Conversation.objects.acreate(owner=alice, title=f"c{i}")
        run = await Run.objects.acreate(conversation=conversation, status=Run.RUNNING)
        recorder = RunRecorder(conversation.pk, run.pk, alice.pk)
        await recorder.event(ModelCalled(call=1, model="claude-test"))
        recorders.append(recorder)
    batches: list[int] = []
    real = textlog.append_pieces

    def counted(pieces):
        batches.append(len({p.run_id for p in pieces}))
        real(pieces)

    monkeypatch.setattr(textlog, "append_pieces", counted)
    # The first run's commit is under way while the others' deltas arrive: they share the next.
    await asyncio.gather(
        *(recorder.event(TextDelta(0, f"text of {recorder.run_id}")) for recorder in recorders)
    )
    await asyncio.gather(*(recorder.flush() for recorder in recorders))
    assert sum(batches) == 3 and len(batches) < 3, batches
    for recorder in recorders:
        assert await sync_to_async(textlog.streamed_text)(recorder.run_id) == [
            {"index": 0, "text": f"text of {recorder.run_id}"}
        ]
        recorder.streams.close()


async def test_a_batch_is_committed_while_the_one_before_it_is_still_being_sent(alice, monkeypatch):
    """The journal commits the next runs' frames while a slow send of the previous batch is out
    (a slow channel layer does not hold every stream's commit back), and still sends each
    batch only after its own commit, in the order they were committed."""
    first, second = await _two_recorders(alice)
    release, out, sent = _holding_the_send_of(monkeypatch, first.run_id)
    await first.event(TextDelta(0, "first"))
    flushing = asyncio.ensure_future(first.flush())
    await asyncio.wait_for(out.wait(), 10)  # committed, and its send is waiting
    await second.event(TextDelta(0, "second"))
    second_flush = asyncio.ensure_future(second.flush())
    for _ in range(200):
        if await sync_to_async(textlog.streamed_text)(second.run_id):
            break
        await asyncio.sleep(0.01)
    # Committed while the first batch is still out; not sent before it.
    assert await sync_to_async(textlog.streamed_text)(second.run_id) == [
        {"index": 0, "text": "second"}
    ]
    assert sent == [] and not flushing.done()
    release.set()
    await asyncio.wait_for(asyncio.gather(flushing, second_flush), 10)
    assert sent == [(first.run_id, "first"), (second.run_id, "second")]
    for recorder in (first, second):
        recorder.streams.close()


def test_a_commit_of_more_pieces_than_one_insert_holds_keeps_every_piece_in_order(alice):
    runs = []
    for i in range(3):
        conversation = Conversation.objects.create(owner=alice, title=f"c{i}")
        runs.append(Run.objects.create(conversation=conversation, status=Run.RUNNING).pk)
    # 250 pieces: three statements (100, 100, 50 rows), in one transaction.
    pieces = [
        textlog.Piece(runs[n % 3], 1, 0, "text", (n // 3) * 4, f"{n:03d} ")
        for n in range(3 * 83 + 1)
    ]
    assert len(pieces) > 2 * textlog.ROWS_PER_INSERT
    textlog.append_pieces(pieces)
    for i, run_id in enumerate(runs):
        expected = "".join(f"{n:03d} " for n in range(i, len(pieces), 3))
        assert textlog.saved_text(run_id, 1, 0, "text") == expected
    assert StreamPiece.objects.count() == len(pieces)


async def test_while_the_database_is_away_the_text_waits_and_nothing_is_lost(
    recorder, alice, monkeypatch, caplog
):
    caplog.set_level(logging.INFO, logger="skills_app.runs.streams")
    tab, frames = await _tab(alice, recorder.conversation_id)
    await _stream(recorder, WORDS[:20])
    await recorder.flush()
    await _read_until(tab, frames, lambda reader: reader.text() == "".join(WORDS[:20]))
    away, real = [True], textlog.append_pieces
    attempts: list[int] = []

    def flaky(pieces):
        attempts.append(len(pieces))
        if away[0]:
            raise OperationalError("connection to server failed: Connection refused")
        real(pieces)

    monkeypatch.setattr(textlog, "append_pieces", flaky)
    await _stream(recorder, WORDS[20:80], pause=0.002)
    flushing = asyncio.ensure_future(recorder.flush())
    while len(attempts) < 4:  # several retries while it is away
        await asyncio.sleep(0.05)
    # Nothing the database lacks reached the tab meanwhile.
    assert Reader().apply(frames).text() == "".join(WORDS[:20])
    away[0] = False
    await asyncio.wait_for(flushing, 10)
    await _stream(recorder, WORDS[80:])
    await recorder.flush()
    await _read_until(tab, frames, lambda reader: reader.text() == TEXT)
    lines = [r for r in caplog.records if getattr(r, "outage", None) == "the database"]
    assert [r.state for r in lines] == ["lost", "back"], [r.getMessage() for r in lines]
    await tab.disconnect()


async def test_the_pieces_of_ended_runs_are_deleted(recorder):
    await _stream(recorder, WORDS[:10])
    await recorder.flush()
    assert await StreamPiece.objects.filter(run_id=recorder.run_id).aexists()
    assert await sync_to_async(textlog.forget_pieces)() == 0  # the run is still going
    await Run.objects.filter(pk=recorder.run_id).aupdate(status=Run.DONE)
    assert await sync_to_async(textlog.forget_pieces)() >= 1
    assert not await StreamPiece.objects.filter(run_id=recorder.run_id).aexists()


async def test_relaying_touches_no_database_and_filling_a_gap_does(recorder, alice):
    tab, frames = await _tab(alice, recorder.conversation_id)
    queries: list[str] = []
    # While the run itself stores and renders its answer (its own database work, in this same
    # thread), nothing is counted: only what relaying costs.
    run_working = [False]

    def count(execute, sql, params, many, context):
        if not run_working[0]:
            queries.append(sql)
        return execute(sql, params, many, context)

    def install() -> None:
        # The consumer's database calls run in this thread (thread-sensitive), on this wrapper.
        connections["default"].execute_wrappers.append(count)

    await sync_to_async(install)()
    try:
        async with watch_group(recorder.conversation_id):
            await _stream(recorder, WORDS[:60], pause=0.002)
            await recorder.flush()
            run_working[0] = True
            row_event = await _publish_stored_answer(recorder)
            run_working[0] = False
        await _read_until(tab, frames, lambda reader: reader.text() == "".join(WORDS[:60]))
        frames += await until(tab, lambda f: f.get("seq") == row_event)
        relayed_by_consumer = [q for q in queries if "skills_app_runevent" in q and "SELECT" in q]
        assert relayed_by_consumer == [], queries
        assert not [q for q in queries if "skills_app_streampiece" in q and "SELECT" in q]
        # Positive control: a seq the tab never got makes it read the database.
        await sync_to_async(eventlog.append_event)(
            recorder.conversation_id, MessageStored(message_id=0, role="user", kind="text")
        )
        last = await sync_to_async(eventlog.append_event)(
            recorder.conversation_id, ModelCalled(call=2, model="m")
        )
        before = len(queries)
        await broadcast.publish(recorder.conversation_id, last.seq, ModelCalled(call=2, model="m"))
        assert await tab.receive_nothing(timeout=0.3)
        assert any("skills_app_runevent" in q and "SELECT" in q for q in queries[before:])
    finally:
        await sync_to_async(lambda: connections["default"].execute_wrappers.remove(count))()
        await tab.disconnect()


async def _publish_stored_answer(recorder: RunRecorder) -> int:
    from skills_app.core.transcript import StoredMessage

    before = await Conversation.objects.values_list("last_event_seq", flat=True).aget(
        pk=recorder.conversation_id
    )
    await recorder.message(StoredMessage.text("assistant", "".join(WORDS[:60])))
    return before + 1


async def test_relaying_takes_no_trip_through_the_database_thread(recorder, alice, monkeypatch):
    """Channels closes stale connections before every handler, in the database thread; a relayed
    frame must not queue there behind the runs' database work."""
    import channels.consumer

    trips = []
    real = channels.consumer.aclose_old_connections

    async def counted() -> None:
        trips.append(1)
        await real()

    monkeypatch.setattr(channels.consumer, "aclose_old_connections", counted)
    tab, frames = await _tab(alice, recorder.conversation_id)
    before = len(trips)
    await _stream(recorder, WORDS[:50], pause=0.002)
    await recorder.flush()
    await _read_until(tab, frames, lambda reader: reader.text() == "".join(WORDS[:50]))
    assert len(trips) == before
    await tab.disconnect()


async def test_frames_get_rarer_while_the_event_loop_lags_and_return_to_full_pace():
    pace = journal()
    assert pace.interval == LIVE_INTERVAL
    pace.pace(lag=0.2)  # one late wake-up (a pause) is not a loop that cannot keep up
    assert pace.interval == LIVE_INTERVAL
    for _ in range(15):
        pace.pace(lag=0.2)  # the loop keeps waking the journal 200 ms late
    assert pace.interval == LIVE_MAX_INTERVAL
    for _ in range(30):
        pace.pace(lag=0.0)
    assert pace.interval == LIVE_INTERVAL


async def test_a_blocked_event_loop_slows_live_frames(recorder):
    await recorder.event(TextDelta(0, "start"))  # the journal watches an open stream now
    pace = journal()
    for _ in range(12):
        time.sleep(0.15)  # the loop is stuck, again and again: the journal's probes wake late
        await asyncio.sleep(0.01)
    assert pace.interval > LIVE_INTERVAL


async def test_when_redis_is_back_a_tab_catches_up_on_what_the_group_lost(
    recorder, alice, monkeypatch
):
    """While Redis was away the group lost frames and stored events; the layer then tells each
    consumer (`layer.resumed`) and it sends what it missed from the database, once."""
    tab, frames = await _tab(alice, recorder.conversation_id)
    await _stream(recorder, WORDS[:30])
    await recorder.flush()
    await _read_until(tab, frames, lambda reader: reader.text() == "".join(WORDS[:30]))
    real_send_live, real_send = broadcast.send_live, broadcast.send

    async def lost(*args: Any, **kwargs: Any) -> None:
        return None

    monkeypatch.setattr(broadcast, "send_live", lost)
    monkeypatch.setattr(broadcast, "send", lost)
    await _stream(recorder, WORDS[30:90])
    await recorder.flush()
    seq = await recorder.record(ConversationTitled(title="Caught up"))  # stored, not sent
    assert await tab.receive_nothing(timeout=0.3)
    monkeypatch.setattr(broadcast, "send_live", real_send_live)
    monkeypatch.setattr(broadcast, "send", real_send)

    layer = get_channel_layer()
    await layer.group_send(
        broadcast.group_name(recorder.conversation_id), {"type": "layer.resumed"}
    )
    await _read_until(tab, frames, lambda reader: reader.text() == "".join(WORDS[:90]))
    # The stored event the group lost came first, then the missing text, from where it stopped.
    titled = [f for f in frames if f.get("seq") == seq]
    assert [f["type"] for f in titled] == ["conversation.titled"]
    assert frames[-1]["type"] == "text.delta" and frames[-1]["offset"] == len("".join(WORDS[:30]))
    await _stream(recorder, WORDS[90:])
    await recorder.flush()
    await _read_until(tab, frames, lambda reader: reader.text() == TEXT)
    await tab.disconnect()


# -- the pipelined journal under attack ---------------------------------------------------------


async def _two_recorders(alice: Any) -> list[RunRecorder]:
    recorders = []
    for i in range(2):
        conversation = await Conversation.objects.acreate(owner=alice, title=f"p{i}")
        run = await Run.objects.acreate(conversation=conversation, status=Run.RUNNING)
        recorder = RunRecorder(conversation.pk, run.pk, alice.pk)
        await recorder.event(ModelCalled(call=1, model="claude-test"))
        recorders.append(recorder)
    return recorders


def _holding_the_send_of(monkeypatch, run_id: int) -> tuple[asyncio.Event, asyncio.Event, list]:
    """send_live waits for `release` on the run's frames; `out` is set when one is waiting."""
    release, out, sent = asyncio.Event(), asyncio.Event(), []
    real_send_live = broadcast.send_live

    async def held(conversation_id, event):
        if event.run_id == run_id:
            out.set()
            await release.wait()
        sent.append((event.run_id, event.text))
        await real_send_live(conversation_id, event)

    monkeypatch.setattr(broadcast, "send_live", held)
    return release, out, sent


async def test_the_journal_is_not_idle_while_a_committed_batch_is_still_being_sent(
    alice, monkeypatch
):
    first, second = await _two_recorders(alice)
    release, out, sent = _holding_the_send_of(monkeypatch, first.run_id)
    await first.event(TextDelta(0, "first"))
    flushing = asyncio.ensure_future(first.flush())
    await asyncio.wait_for(out.wait(), 10)
    first.streams.close()
    second.streams.close()  # nothing watched: only the send is left
    assert not journal().idle()
    release.set()
    await asyncio.wait_for(flushing, 10)
    for _ in range(100):
        if journal().idle():
            break
        await asyncio.sleep(0.01)
    assert journal().idle() and sent == [(first.run_id, "first")]


async def test_an_outage_while_a_batch_is_out_holds_neither_that_batch_nor_the_order(
    alice, monkeypatch
):
    """The database goes away while the first run's frames are being sent: they still go out
    (they were committed) and its flush returns; the second run's frames wait for their commit
    and are sent after, never before."""
    first, second = await _two_recorders(alice)
    release, out, sent = _holding_the_send_of(monkeypatch, first.run_id)
    await first.event(TextDelta(0, "first"))
    flushing = asyncio.ensure_future(first.flush())
    await asyncio.wait_for(out.wait(), 10)
    away, real, attempts = [True], textlog.append_pieces, []

    def flaky(pieces):
        attempts.append(len(pieces))
        if away[0]:
            raise OperationalError("connection to server failed: Connection refused")
        real(pieces)

    monkeypatch.setattr(textlog, "append_pieces", flaky)
    await second.event(TextDelta(0, "second"))
    second_flush = asyncio.ensure_future(second.flush())
    while len(attempts) < 2:
        await asyncio.sleep(0.02)
    release.set()
    await asyncio.wait_for(flushing, 10)  # not held by the other batch's outage
    assert sent == [(first.run_id, "first")] and not second_flush.done()
    away[0] = False
    await asyncio.wait_for(second_flush, 10)
    assert sent == [(first.run_id, "first"), (second.run_id, "second")]
    assert await sync_to_async(textlog.streamed_text)(second.run_id) == [
        {"index": 0, "text": "second"}
    ]
    for recorder in (first, second):
        recorder.streams.close()


async def test_a_send_that_fails_holds_back_neither_its_run_nor_the_next_batch(alice, monkeypatch):
    first, second = await _two_recorders(alice)
    real_send_live, sent = broadcast.send_live, []

    async def failing_for_the_first(conversation_id, event):
        if event.run_id == first.run_id:
            raise RuntimeError("the channel layer refused the frame")
        sent.append(event.run_id)
        await real_send_live(conversation_id, event)

    monkeypatch.setattr(broadcast, "send_live", failing_for_the_first)
    await first.event(TextDelta(0, "first"))
    await second.event(TextDelta(0, "second"))
    await asyncio.wait_for(asyncio.gather(first.flush(), second.flush()), 10)
    await first.event(TextDelta(0, " again"))
    await second.event(TextDelta(0, " again"))
    await asyncio.wait_for(asyncio.gather(first.flush(), second.flush()), 10)
    assert sent == [second.run_id, second.run_id]
    # Committed all the same: a tab fills the hole from the database.
    assert await sync_to_async(textlog.streamed_text)(first.run_id) == [
        {"index": 0, "text": "first again"}
    ]
    for recorder in (first, second):
        recorder.streams.close()


async def test_frames_handed_over_while_a_cancelled_writer_lets_its_send_out_are_sent(
    alice, monkeypatch
):
    """A writer cancelled while a batch is out still lets that batch out (shielded); frames
    that arrive meanwhile must not wait for a writer that is leaving."""
    first, second = await _two_recorders(alice)
    release, out, sent = _holding_the_send_of(monkeypatch, first.run_id)
    await first.event(TextDelta(0, "first"))
    flushing = asyncio.ensure_future(first.flush())
    await asyncio.wait_for(out.wait(), 10)
    writer = journal()._writer
    assert writer is not None
    writer.cancel()  # it waits for its send now, shielded
    await second.event(TextDelta(0, "second"))
    second_flush = asyncio.ensure_future(second.flush())
    while not journal()._pending:  # the second run's frames are handed over
        await asyncio.sleep(0.01)
    release.set()
    await asyncio.wait_for(flushing, 10)
    await asyncio.wait_for(second_flush, 10)
    assert sent == [(first.run_id, "first"), (second.run_id, "second")]
    for recorder in (first, second):
        recorder.streams.close()


async def test_a_batch_committed_behind_a_send_still_goes_out_when_the_writer_is_cancelled(
    alice, monkeypatch
):
    first, second = await _two_recorders(alice)
    release, out, sent = _holding_the_send_of(monkeypatch, first.run_id)
    await first.event(TextDelta(0, "first"))
    flushing = asyncio.ensure_future(first.flush())
    await asyncio.wait_for(out.wait(), 10)
    await second.event(TextDelta(0, "second"))
    second_flush = asyncio.ensure_future(second.flush())
    # Committed, and waiting for the first batch to be out.
    while not await sync_to_async(textlog.streamed_text)(second.run_id):
        await asyncio.sleep(0.01)
    writer = journal()._writer
    assert writer is not None
    writer.cancel()
    release.set()
    await asyncio.wait_for(asyncio.gather(flushing, second_flush), 10)
    assert sent == [(first.run_id, "first"), (second.run_id, "second")]
    for recorder in (first, second):
        recorder.streams.close()


async def test_a_runs_second_batch_never_overtakes_its_first_when_its_writer_was_cancelled(
    alice, monkeypatch
):
    """Whoever handed a run's batch over is cancelled (it stops waiting; the run's lock is
    free) and the run hands over more while that batch is still out: the second batch is
    committed meanwhile but sent after the first."""
    first, second = await _two_recorders(alice)
    release, out, sent = _holding_the_send_of(monkeypatch, first.run_id)

    def frame(text: str, offset: int) -> TextDelta:
        return TextDelta(0, text, run_id=first.run_id, call=1, offset=offset)

    writing = asyncio.ensure_future(journal().write(first.streams, [frame("one ", 0)]))
    await asyncio.wait_for(out.wait(), 10)
    writing.cancel()
    await asyncio.gather(writing, return_exceptions=True)
    again = asyncio.ensure_future(journal().write(first.streams, [frame("two", 4)]))
    while await sync_to_async(textlog.saved_text)(first.run_id, 1, 0, "text") != "one two":
        await asyncio.sleep(0.01)
    assert sent == []
    release.set()
    await asyncio.wait_for(again, 10)
    assert sent == [(first.run_id, "one "), (first.run_id, "two")]
    for recorder in (first, second):
        recorder.streams.close()


# -- a finished answer's row waits for the live text of other runs --------------------------------

ANSWER = StoredMessage.text("assistant", "the whole answer, as the tab already shows it")
TOOL_CALL = StoredMessage(
    role="assistant",
    content=(
        {"type": "text", "text": "let me read it"},
        {"type": "tool_use", "id": "toolu_01", "name": "Read", "input": {"file_path": "a.txt"}},
    ),
)


class _Working:
    """Threads that keep the process working (hashing releases the interpreter lock, so eight
    use more than a core between them even on a machine busy with other tests) until it ends."""

    def __enter__(self) -> _Working:
        self._stop = threading.Event()
        block = bytes(1 << 20)

        def spin() -> None:
            while not self._stop.is_set():
                hashlib.sha256(block).digest()

        self._threads = [threading.Thread(target=spin, daemon=True) for _ in range(8)]
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(5)


async def test_the_journal_finds_the_process_busy_while_it_works_and_not_when_idle(monkeypatch):
    monkeypatch.setattr(streams, "BUSY_PROBE", 0.3)
    # The measurement is under test, not the share that counts as busy: a tenth of a core, which
    # eight hashing threads pass even when other work holds both cores, and an idle process (a
    # loop asleep) is far below.
    monkeypatch.setattr(streams, "BUSY_SHARE", 0.1)
    readings: list[bool] = []
    with _Working():
        # The threads get their share of a machine busy with other tests only now and then (a
        # full run under load once read five 0.3-s probes all idle); the waits probe again and
        # again, and so does this, up to 30 times (stopping at the first busy reading).
        while len(readings) < 30 and not any(readings):
            readings.append(await journal().busy())
    assert any(readings), readings
    assert not await journal().busy()


class _Load:
    """How busy the process is, as `Journal.busy` reports it, while the test says so: the
    measurement is tested above, with real work; here the answer's waits follow it exactly."""

    def __init__(self) -> None:
        self.high = False
        self.probed = asyncio.Event()  # a wait has asked: the work is waiting now

    def __enter__(self) -> _Load:
        self.high = True
        return self

    def __exit__(self, *exc: object) -> None:
        self.high = False


@pytest.fixture
def busy(monkeypatch) -> _Load:
    load = _Load()

    async def measured(journal: Any) -> bool:
        load.probed.set()
        await asyncio.sleep(streams.BUSY_PROBE)  # a probe takes its time, like the real one
        return load.high

    monkeypatch.setattr(streams.Journal, "busy", measured)
    return load


async def _answers(recorder: RunRecorder) -> int:
    return await Message.objects.filter(
        conversation_id=recorder.conversation_id, role=Message.ASSISTANT
    ).acount()


async def test_a_finished_answer_waits_while_other_runs_stream_in_a_busy_process(
    alice, monkeypatch, busy
):
    monkeypatch.setattr(streams, "FINISH_WAIT", 60.0)
    first, second = await _two_recorders(alice)
    await second.event(TextDelta(0, "still streaming"))
    with busy:
        storing = asyncio.ensure_future(first.message(ANSWER))
        for _ in range(3):  # it asks again and again, and waits on
            await asyncio.wait_for(busy.probed.wait(), 10)
            busy.probed.clear()
            assert not storing.done()
            assert await _answers(first) == 0
    # The process is quiet again: the row goes in long before FINISH_WAIT.
    await asyncio.wait_for(storing, 10)
    assert await _answers(first) == 1
    second.streams.close()


async def test_a_busy_process_waits_at_most_finish_wait(alice, monkeypatch, busy):
    monkeypatch.setattr(streams, "FINISH_WAIT", 0.4)
    first, second = await _two_recorders(alice)
    await second.event(TextDelta(0, "still streaming"))
    with busy:
        started = time.monotonic()
        await asyncio.wait_for(first.message(ANSWER), 10)
        assert time.monotonic() - started >= 0.35
    assert await _answers(first) == 1
    second.streams.close()


async def test_a_stop_while_the_answer_waits_stores_it_at_once_then_stops(alice, monkeypatch, busy):
    """The answer streamed whole and waits for its row; the user presses Stop: the row goes in
    now (the stop must not keep less than the tab showed) and the run still stops."""
    monkeypatch.setattr(streams, "FINISH_WAIT", 60.0)
    first, second = await _two_recorders(alice)
    await second.event(TextDelta(0, "still streaming"))
    with busy:
        storing = asyncio.ensure_future(first.message(ANSWER))
        await asyncio.wait_for(busy.probed.wait(), 10)
        assert await _answers(first) == 0
        storing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(storing, 10)
    assert await _answers(first) == 1
    # The wait's turn was given back: the next answer (the other run still streams, the process
    # is quiet) is not held behind the stopped one.
    await asyncio.wait_for(first.message(ANSWER), 10)
    assert await _answers(first) == 2
    second.streams.close()


async def test_a_stop_while_the_answer_waits_still_stops_when_the_store_fails(
    alice, monkeypatch, busy
):
    """The row goes in at once after the Stop, and the database refuses it: the run must still
    stop (the cancellation is raised, the failure is its cause), not end as a failure."""
    monkeypatch.setattr(streams, "FINISH_WAIT", 60.0)
    first, second = await _two_recorders(alice)
    await second.event(TextDelta(0, "still streaming"))

    def refused(*args: Any) -> Any:
        raise OperationalError("disk I/O error")

    monkeypatch.setattr(RunRecorder, "_store_message", lambda self, *args: refused())
    with busy:
        storing = asyncio.ensure_future(first.message(ANSWER))
        await asyncio.wait_for(busy.probed.wait(), 10)
        storing.cancel()
        with pytest.raises(asyncio.CancelledError) as stopped:
            await asyncio.wait_for(storing, 10)
    assert isinstance(stopped.value.__cause__, OperationalError)
    second.streams.close()


async def test_a_run_closed_elsewhere_while_its_answer_waited_stores_nothing(
    alice, monkeypatch, busy
):
    """Another process took the run for dead and kept its streamed text meanwhile: the waiting
    answer must not add a second copy to the closed history."""
    from skills_app.runs import tasks

    monkeypatch.setattr(streams, "FINISH_WAIT", 60.0)
    first, second = await _two_recorders(alice)
    await second.event(TextDelta(0, "still streaming"))
    try:
        with busy:
            storing = asyncio.ensure_future(first.message(ANSWER))
            await asyncio.wait_for(busy.probed.wait(), 10)
            tasks.ABANDONED.add(first.run_id)
        await asyncio.wait_for(storing, 10)
        assert await _answers(first) == 0
    finally:
        tasks.ABANDONED.discard(first.run_id)
        second.streams.close()


SUBAGENT_ANSWER = StoredMessage.text(
    "assistant", "what the subagent found", to_model=False, meta={"subagent_run": 7}
)


@pytest.mark.parametrize(
    "message,streaming",
    [(ANSWER, False), (TOOL_CALL, True), (SUBAGENT_ANSWER, True)],
    ids=["no-other-stream", "tool-call", "subagent-answer"],
)
async def test_what_nothing_live_waits_for_and_what_a_run_waits_for_are_stored_at_once(
    alice, monkeypatch, busy, message, streaming
):
    """With no other run streaming there is no live text to yield to. An answer that calls a
    tool holds its run up (the tool runs after its row), a subagent's answer its parent run
    (it is the parent's tool result): neither waits."""
    monkeypatch.setattr(streams, "FINISH_WAIT", 60.0)
    first, second = await _two_recorders(alice)
    if streaming:
        await second.event(TextDelta(0, "still streaming"))
    with busy:
        await asyncio.wait_for(first.message(message), 10)
    assert await _answers(first) == 1
    second.streams.close()


async def test_what_a_stop_stores_does_not_wait_for_the_live_text(
    demo_model, settings, alice, monkeypatch, busy
):
    """A Stop while the answer streams: the partial answer and the stop note are stored while
    the run's task is being cancelled. They are what a stop keeps, not a finished answer: the
    stop ends at once, however busy the process and however long FINISH_WAIT."""
    from skills_app.runs import supervisor as runs

    monkeypatch.setattr(streams, "FINISH_WAIT", 60.0)
    settings.MODEL_CLIENT = "skills_app.runs.client.default_client"
    settings.DEMO_MODEL_DELAY = 0.05  # a demo answer slow enough to be stopped midway
    other, _ = await _two_recorders(alice)
    await other.event(TextDelta(0, "still streaming"))
    conversation = await Conversation.objects.acreate(owner=alice, title="stopped")
    run = await runs.start_run(conversation.pk, "hello there", user_id=alice.pk)
    try:
        with busy:
            pieces = StreamPiece.objects.filter(run_id=run.pk)
            await wait_until(pieces.aexists, what="the run's streamed text")
            assert await runs.stop_run(run.pk)
            # stop_run waits for the run's end, STOP_WAIT_SECONDS at most.
            assert (await Run.objects.aget(pk=run.pk)).status == Run.STOPPED
        notes = Message.objects.filter(run_id=run.pk, role=Message.ASSISTANT)
        kept = [meta async for meta in notes.order_by("seq").values_list("meta", flat=True)]
        assert kept == [{"partial": True}, {"code": "stopped"}]
    finally:
        other.streams.close()
        await runs.wait_for_run(run.pk, timeout=120)
