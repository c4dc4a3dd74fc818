"""Benchmark: rebuild the model request of a 500-message conversation from its stored rows.

Run: .venv/bin/python bench/bench_build_request.py   (target: under 30 ms per build)
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
_tmp = tempfile.mkdtemp(prefix="skillscope-bench-")
os.environ["SKILLSCOPE_VAR_DIR"] = _tmp

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402

from skills_app.core.transcript import status_message_text  # noqa: E402
from skills_app.models import Conversation, Message  # noqa: E402
from skills_app.runs import agent_setup  # noqa: E402

TARGET_MS = 30.0
MESSAGES = 500


def make_conversation() -> Conversation:
    user = get_user_model().objects.create_user("bench")
    conversation = Conversation.objects.create(owner=user, title="bench")
    rows: list[Message] = []
    seq = 0
    while seq < MESSAGES:
        turn = seq // 5
        batch = [
            (
                "user",
                "text",
                False,
                [{"type": "text", "text": f"Question {turn}: " + "words " * 40}],
            ),
            (
                "assistant",
                "tool_use",
                False,
                [
                    {"type": "text", "text": "Let me check. " * 10},
                    {
                        "type": "tool_use",
                        "id": f"toolu_{turn}",
                        "name": "Read",
                        "input": {"file_path": "work/a.txt"},
                    },
                ],
            ),
            (
                "user",
                "tool_result",
                False,
                [{"type": "tool_result", "tool_use_id": f"toolu_{turn}", "content": "line\n" * 60}],
            ),
            (
                "user",
                "skill_status",
                False,
                [{"type": "text", "text": status_message_text("release-notes", "v1")}],
            ),
            ("assistant", "text", False, [{"type": "text", "text": "Here is the answer. " * 30}]),
        ]
        for role, kind, is_meta, content in batch:
            seq += 1
            rows.append(
                Message(
                    conversation=conversation,
                    seq=seq,
                    role=role,
                    kind=kind,
                    is_meta=is_meta,
                    content=content,
                )
            )
    Message.objects.bulk_create(rows)
    return conversation


def main() -> None:
    call_command("migrate", verbosity=0)
    conversation = make_conversation()
    agent_setup.build_request(conversation)  # warm the skills registry and imports
    timings = []
    for _ in range(30):
        start = time.perf_counter()
        request = agent_setup.build_request(conversation)
        timings.append((time.perf_counter() - start) * 1000)
    median = statistics.median(timings)
    print(f"build_request over {MESSAGES} stored messages -> {len(request.messages)} API turns")
    print(
        f"  median {median:.1f} ms, p90 {sorted(timings)[int(len(timings) * 0.9)]:.1f} ms, min {min(timings):.1f} ms"
    )
    print(f"  target < {TARGET_MS:.0f} ms: {'PASS' if median < TARGET_MS else 'MISS'}")


if __name__ == "__main__":
    main()
