"""Structured logs: records carry run_id and conversation_id; LOG_FORMAT=json is one object a line."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys

from asgiref.sync import sync_to_async

from skills_app.core.logcontext import RunContextFilter, current_ids, log_context
from skills_app.ops.logformat import JsonFormatter
from tests.support.paths import REPO

ROOT = REPO


def _record(message: str = "hello %s", *args: object, **extra: object) -> logging.LogRecord:
    record = logging.getLogger("skills_app.test").makeRecord(
        "skills_app.test", logging.WARNING, __file__, 1, message, args or ("world",), None
    )
    record.__dict__.update(extra)
    RunContextFilter().filter(record)
    return record


def test_a_record_inside_a_run_carries_its_ids():
    with log_context(run_id=5, conversation_id=3):
        line = JsonFormatter().format(_record())
    entry = json.loads(line)
    assert entry["run_id"] == 5
    assert entry["conversation_id"] == 3
    assert entry["message"] == "hello world"
    assert entry["level"] == "WARNING"
    assert entry["logger"] == "skills_app.test"
    assert entry["time"].endswith("+00:00")


def test_a_record_outside_any_run_has_no_ids():
    entry = json.loads(JsonFormatter().format(_record()))
    assert "run_id" not in entry and "conversation_id" not in entry


def test_extras_and_exceptions_are_kept():
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.getLogger("x").makeRecord(
            "x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info(), extra={"worker": "w1"}
        )
    RunContextFilter().filter(record)
    entry = json.loads(JsonFormatter().format(record))
    assert entry["worker"] == "w1"
    assert "ValueError: boom" in entry["exception"]
    assert "log_context" not in entry


def test_an_extra_json_cannot_hold_is_logged_not_raised():
    entry = json.loads(JsonFormatter().format(_record(thing=object())))
    assert entry["thing"].startswith("<object object")


def test_ids_passed_with_extra_win_over_the_context():
    with log_context(run_id=5, conversation_id=3):
        record = _record(run_id=9)
    assert (record.run_id, record.conversation_id) == (9, 3)
    assert record.log_context == " run=9 conversation=3"


def test_nested_contexts_restore_the_outer_ids():
    with log_context(run_id=1, conversation_id=10):
        with log_context(run_id=2):
            assert current_ids() == (2, 10)
        assert current_ids() == (1, 10)
    assert current_ids() == (None, None)


async def test_ids_follow_the_run_into_its_tasks_and_threads():
    seen: list[tuple[int | None, int | None]] = []

    async def child() -> None:
        seen.append(current_ids())
        await sync_to_async(lambda: seen.append(current_ids()))()

    async def run() -> None:
        with log_context(run_id=7, conversation_id=8):
            await asyncio.create_task(child())

    other = asyncio.create_task(asyncio.sleep(0))  # started outside: must not see the ids
    await run()
    await other
    assert seen == [(7, 8), (7, 8)]
    assert current_ids() == (None, None)


def _django_logs(
    env_extra: dict[str, str], code: str, *, command: str = "shell"
) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "DJANGO_SETTINGS_MODULE": "webapp.settings", **env_extra}
    args = ["shell", "-c", code] if command == "shell" else [command]
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


LOG_INSIDE_A_RUN = (
    "import logging\n"
    "from skills_app.core.logcontext import log_context\n"
    "with log_context(run_id=41, conversation_id=42):\n"
    "    logging.getLogger('skills_app.runs.execute').warning('model call %s failed', 2)\n"
)


def test_the_settings_write_json_lines_with_the_ids(tmp_path):
    result = _django_logs(
        {"LOG_FORMAT": "json", "SKILLSCOPE_VAR_DIR": str(tmp_path)}, LOG_INSIDE_A_RUN
    )
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    assert [(e["message"], e["run_id"], e["conversation_id"]) for e in lines] == [
        ("model call 2 failed", 41, 42)
    ]


def test_the_text_format_shows_the_ids_too(tmp_path):
    result = _django_logs({"SKILLSCOPE_VAR_DIR": str(tmp_path)}, LOG_INSIDE_A_RUN)
    assert result.returncode == 0, result.stderr
    assert "WARNING skills_app.runs.execute run=41 conversation=42: model call 2 failed" in (
        result.stderr
    )


def test_log_level_is_honoured_and_checked(tmp_path):
    quiet = _django_logs(
        {"LOG_LEVEL": "error", "SKILLSCOPE_VAR_DIR": str(tmp_path)}, LOG_INSIDE_A_RUN
    )
    assert quiet.returncode == 0 and "model call" not in quiet.stderr
    # `shell` tolerates broken settings; every other command (and daphne) stops with 78.
    wrong = _django_logs(
        {"LOG_LEVEL": "loud", "SKILLSCOPE_VAR_DIR": str(tmp_path)}, "", command="check"
    )
    assert wrong.returncode == 78
    assert "LOG_LEVEL='LOUD' must be one of" in wrong.stderr
