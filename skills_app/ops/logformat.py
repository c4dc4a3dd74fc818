"""One JSON object per log line (LOG_FORMAT=json), for journald, a log shipper or `jq`."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

# Attributes every LogRecord has; anything else on a record came from `extra=` and is included.
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {
    "message",
    "asctime",
    "log_context",
    "run_id",
    "conversation_id",
}


class JsonFormatter(logging.Formatter):
    """time, level, logger, message, run_id/conversation_id when known, extras, exception."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in ("run_id", "conversation_id"):
            value = getattr(record, name, None)
            if value is not None:
                entry[name] = value
        for name, value in record.__dict__.items():
            if name not in _STANDARD and name not in entry and not name.startswith("_"):
                entry[name] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        # default=repr: an extra that JSON cannot hold is still logged, never an error in logging.
        return json.dumps(entry, default=repr, ensure_ascii=False)
