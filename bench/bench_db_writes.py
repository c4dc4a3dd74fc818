"""Database writes per streamed answer, in-process against the fake model.

Run: .venv/bin/python bench/bench_db_writes.py
Drives whole runs (real SDK, RunRecorder, stream saver, SQLite in a temp dir) with answers of
different lengths and pacing; counts INSERT/UPDATE/DELETE statements on every connection
(execute_wrapper installed on connection creation) and the RunEvent / Message rows each run
added. Target (issue 15): writes bounded by how long the answer streams, a few per second,
never one per delta.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
_VAR_DIR = tempfile.mkdtemp(prefix="skillscope-bench-db-")
atexit.register(shutil.rmtree, _VAR_DIR, ignore_errors=True)
os.environ["SKILLSCOPE_VAR_DIR"] = _VAR_DIR
for name in ("DATABASE_URL", "REDIS_URL", "SQLITE_PATH"):
    os.environ.pop(name, None)

import logging  # noqa: E402

import django  # noqa: E402

logging.getLogger("httpx").setLevel(logging.WARNING)

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db.backends.signals import connection_created  # noqa: E402

from skills_app.models import Conversation, Message, RunEvent  # noqa: E402
from skills_app.runs import supervisor as runs  # noqa: E402
from tests.support.fake_anthropic import FakeAnthropic, Reply  # noqa: E402

COUNTS = {"write": 0, "read": 0}


def _counter(execute, sql, params, many, context):
    verb = sql.lstrip().split(" ", 1)[0].upper()
    COUNTS["write" if verb in ("INSERT", "UPDATE", "DELETE") else "read"] += 1
    return execute(sql, params, many, context)


def _install(sender, connection, **kwargs):
    connection.execute_wrappers.append(_counter)


CASES = [
    # (label, characters, chunk, seconds between deltas)
    ("1,000 deltas, as fast as possible", 8_000, 8, 0.0),
    ("25,000 deltas, as fast as possible", 200_000, 8, 0.0),
    ("1,000 deltas at ~200/s (5 s)", 8_000, 8, 0.005),
    ("500 deltas at ~50/s (10 s)", 4_000, 8, 0.02),
    ("200 deltas at ~20/s (10 s)", 1_600, 8, 0.05),
]


async def one_run(fake: FakeAnthropic, user, chars: int, chunk: int, delay: float):
    conversation = await Conversation.objects.acreate(owner=user, title="bench")
    fake.enqueue(Reply.text("x" * chars, chunk=chunk, delay=delay))
    before = dict(COUNTS)
    started = time.monotonic()
    run = await runs.start_run(conversation.pk, "write it", user_id=user.pk)
    await runs.wait_for_run(run.pk, timeout=600)
    seconds = time.monotonic() - started
    writes = COUNTS["write"] - before["write"]
    events = RunEvent.objects.filter(conversation=conversation)
    saved = await events.filter(type="text.saved").acount()
    messages = await Message.objects.filter(conversation=conversation, role="assistant").acount()
    stored = await Message.objects.filter(conversation=conversation, role="assistant").afirst()
    assert stored is not None and stored.content[-1]["text"] == "x" * chars
    return writes, await events.acount(), saved, messages, seconds


async def main_async(user) -> None:
    with FakeAnthropic() as fake:
        settings.ANTHROPIC_API_KEY = "sk-bench"
        settings.ANTHROPIC_BASE_URL = fake.base_url
        settings.RATE_LIMIT_CONCURRENT_RUNS = 1000
        settings.ANTHROPIC_THINKING = None  # the model's default: no thinking for the test model
        await one_run(fake, user, 80, 8, 0.0)  # warm up
        print(
            "| answer | model deltas | run seconds | text.saved events | all RunEvents "
            "| assistant Messages | DB writes per run | writes per second | writes per 1,000 deltas |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        for label, chars, chunk, delay in CASES:
            model_deltas = -(-chars // chunk)
            writes, events, saved, messages, seconds = await one_run(
                fake, user, chars, chunk, delay
            )
            print(
                f"| {label} | {model_deltas:,} | {seconds:.1f} | {saved} | {events} | {messages} "
                f"| {writes} | {writes / seconds:.1f} | {writes / model_deltas * 1000:.0f} |"
            )


if __name__ == "__main__":
    connection_created.connect(_install)
    call_command("migrate", verbosity=0, interactive=False)
    asyncio.run(main_async(get_user_model().objects.create(username="bench")))
