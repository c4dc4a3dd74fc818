"""CPU of the live text's journal per committed piece: the ORM's bulk_create against the prepared
INSERT `textlog.append_pieces` runs (issue 27).

Run: .venv/bin/python bench/bench_journal_cpu.py [--runs 100] [--batches 200]
SQLite in a temp dir (WAL, as configured). Each batch is what one journal tick commits under the
100-stream load: one piece for each of `runs` streaming runs, in one transaction. Prints the
thread CPU time (`time.thread_time`: hardly affected by other processes' load, unlike wall time)
per piece, best of 3, for both ways of writing the same rows.
"""

from __future__ import annotations

import argparse
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
_VAR_DIR = tempfile.mkdtemp(prefix="skillscope-bench-journal-")
atexit.register(shutil.rmtree, _VAR_DIR, ignore_errors=True)
os.environ["SKILLSCOPE_VAR_DIR"] = _VAR_DIR
for name in ("DATABASE_URL", "REDIS_URL", "SQLITE_PATH"):
    os.environ.pop(name, None)

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import transaction  # noqa: E402

from skills_app import textlog  # noqa: E402
from skills_app.models import Conversation, Run, StreamPiece  # noqa: E402

PIECE = "a streamed piece of about forty characters "


def _orm(pieces: list[textlog.Piece]) -> None:
    # What the journal did before: a model instance per row, bulk_create in one transaction.
    rows = [
        StreamPiece(
            run_id=p.run_id, call=p.call, index=p.block, kind=p.kind, offset=p.offset, text=p.text
        )
        for p in pieces
    ]
    with transaction.atomic():
        StreamPiece.objects.bulk_create(rows)


def _raw(pieces: list[textlog.Piece]) -> None:
    textlog.append_pieces(pieces)


def measure(write: object, run_ids: list[int], batches: int) -> float:
    """CPU seconds per piece over `batches` ticks of one piece per run."""
    assert callable(write)
    offset = 0
    started = time.thread_time()
    for _ in range(batches):
        write([textlog.Piece(run_id, 1, 0, "text", offset, PIECE) for run_id in run_ids])
        offset += len(PIECE)
    spent = time.thread_time() - started
    StreamPiece.objects.all().delete()
    return spent / (batches * len(run_ids))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--batches", type=int, default=200)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_user("bench", password="not-used-here")
    run_ids = []
    for i in range(args.runs):
        conversation = Conversation.objects.create(owner=owner, title=f"c{i}")
        run_ids.append(Run.objects.create(conversation=conversation, status=Run.RUNNING).pk)
    results = {}
    for name, write in (("bulk_create (before)", _orm), ("prepared INSERT (now)", _raw)):
        results[name] = min(measure(write, run_ids, args.batches) for _ in range(3))
    print(f"{args.runs} runs x {args.batches} ticks, one piece per run per tick; CPU per piece:")
    for name, seconds in results.items():
        per_100k = seconds * 100_000
        print(f"  {name:24} {seconds * 1e6:6.1f} us  ({per_100k:.2f} s per 100,000 pieces)")


if __name__ == "__main__":
    main()
