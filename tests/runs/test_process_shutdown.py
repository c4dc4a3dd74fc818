"""A single-process server that is stopped (SIGTERM from systemd, Ctrl+C) gives its runs up at once:
each is marked interrupted with the text already streamed, as a stopping worker does, instead of
being left "running" until the next start's sweep finds it (issue 24: every task has an owner,
shutdown included).

Real daphne serving the app with runs executed inline, the stamping fake model of bench/live.py
streaming a long answer, a websocket as the tab; the stored state is read from daphne's own
SQLite database after it exited.
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
from pathlib import Path

import pytest

from bench.live import Daphne, FakeModel
from tests.multiprocess.wsclient import WebSocket

pytestmark = pytest.mark.timeout(120)


async def _start_answer(server: Daphne) -> int:
    """Send a message whose answer streams for a minute; return once text has arrived."""
    conversation = server.conversation_ids[0]
    ws = await WebSocket.connect(
        "127.0.0.1",
        server.port,
        f"/ws/conversations/{conversation}/",
        headers={
            "Origin": f"http://127.0.0.1:{server.port}",
            "Cookie": f"sessionid={server.session}",
        },
        timeout=30,
    )
    try:
        await ws.send_json({"action": "resume", "after": 0})
        while (await ws.receive_frame(timeout=30)).get("type") != "resumed":
            pass
        await ws.send_json({"action": "send", "text": "paced 20 60"})
        deltas = 0
        while deltas < 10:
            if (await ws.receive_frame(timeout=30)).get("type") == "text.delta":
                deltas += 1
        return conversation
    finally:
        await ws.close()


def test_stopping_the_server_interrupts_its_runs_and_keeps_their_text(migrated_sqlite):
    with (
        FakeModel() as model,
        Daphne(
            model_url=model.url, env_extra={"LOG_LEVEL": "INFO"}, database=migrated_sqlite
        ) as server,
    ):
        assert server.process is not None
        conversation = asyncio.run(_start_answer(server))
        server.process.send_signal(signal.SIGTERM)
        # Daphne handles the signal (status 0): its reactor stops after the runs were given up.
        assert server.process.wait(30) == 0, Path(server.log.name).read_text()[-3000:]
        database = sqlite3.connect(Path(server.var_dir) / "db.sqlite3")
        try:
            runs = database.execute(
                "SELECT status, error_kind FROM skills_app_run WHERE conversation_id = ?",
                (conversation,),
            ).fetchall()
            answers = database.execute(
                "SELECT content FROM skills_app_message"
                " WHERE conversation_id = ? AND role = 'assistant'",
                (conversation,),
            ).fetchall()
        finally:
            database.close()
        log = Path(server.log.name).read_text()
    assert [status for status, _kind in runs] == ["interrupted"], (runs, log[-3000:])
    assert "process stopping: 1 run(s) interrupted" in log
    # The model client's connections were closed on daphne's loop before its reactor stopped
    # (Twisted's reactor stops its loop without asyncio's shutdown of async generators).
    assert "process stopping: 1 model client(s) closed" in log, log[-3000:]
    assert "Unclosed" not in log, log[-3000:]
    # The ten deltas the tab was shown (each a "<send time>" stamp) are in the kept answer.
    kept = "".join(str(content) for (content,) in answers)
    assert kept.count("<") >= 10, kept[:500]
