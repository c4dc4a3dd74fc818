"""Quiet, useful logs while a service is away: one line per change of state, not per attempt.

An outage of the database or of Redis makes every loop that touches it fail several times a
second; logging each failure with its traceback buries the one line an operator needs under
megabytes. An `Outage` logs instead:

- "lost" once, with the error's one-line text and the first retry interval (WARNING);
- "still away" when the retry interval reaches its cap, with that interval (WARNING);
- "back" once, with how long it was away and how many attempts failed meanwhile (INFO);

and at most one traceback per TRACEBACK_SECONDS (the first failure's, then a reminder), so a
failure that is not an outage is still seen with its cause. Every line is logged from where the
failure happened, so the run and conversation ids of `logcontext` are on it as on any other line.

`Backoff` is the retry interval: doubling from `first` up to `cap`.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

# At most one traceback per this many seconds for one outage (the first failure always has one).
TRACEBACK_SECONDS = 60.0


@dataclass(slots=True)
class Backoff:
    """A retry interval that doubles from `first` to `cap`, and starts over with `reset`."""

    first: float = 0.5
    cap: float = 10.0
    current: float = 0.0

    def next(self) -> float:
        """The interval to wait before the next attempt."""
        self.current = self.first if not self.current else min(self.cap, self.current * 2)
        return self.current

    @property
    def capped(self) -> bool:
        return self.current >= self.cap

    def reset(self) -> None:
        self.current = 0.0


@dataclass
class Outage:
    """The state of one dependency as seen by one loop of this process: up, or away since when."""

    what: str  # "the database", "the channel layer (Redis)"
    logger: logging.Logger
    who: str = ""  # who notices ("worker host pid 12 #ab12cd"), prefixed to every line
    since: float | None = None
    failures: int = 0
    _traced: float = 0.0
    _said_capped: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def away(self) -> bool:
        return self.since is not None

    def _prefix(self) -> str:
        return f"{self.who}: " if self.who else ""

    def failed(self, error: BaseException, *, retry_in: float | None = None) -> None:
        """One attempt failed: log the loss once (and a traceback now and then), count the rest."""
        now = time.monotonic()
        with self._lock:
            first = self.since is None
            if first:
                self.since, self.failures, self._said_capped = now, 0, False
            self.failures += 1
            trace = first or now - self._traced >= TRACEBACK_SECONDS
            if trace:
                self._traced = now
        retry = f"; retrying in {retry_in:g} s" if retry_in is not None else "; retrying"
        summary = f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"
        if first:
            self.logger.warning(
                "%s%s lost (%s)%s, backing off while it is away",
                self._prefix(),
                self.what,
                summary,
                retry,
                exc_info=error,
                extra={"outage": self.what, "state": "lost"},
            )
        elif trace:
            self.logger.warning(
                "%s%s still away after %.0f s (%d failed attempts; last: %s)",
                self._prefix(),
                self.what,
                now - (self.since or now),
                self.failures,
                summary,
                exc_info=error,
                extra={"outage": self.what, "state": "away"},
            )

    def capped(self, interval: float) -> None:
        """The retry interval reached its cap: say so once per outage."""
        with self._lock:
            if self.since is None or self._said_capped:
                return
            self._said_capped = True
            away = time.monotonic() - self.since
        self.logger.warning(
            "%s%s still away after %.0f s; retrying every %g s",
            self._prefix(),
            self.what,
            away,
            interval,
            extra={"outage": self.what, "state": "retrying", "interval": interval},
        )

    def recovered(self) -> float | None:
        """An attempt succeeded: log "back" if it was away; how long it was away (None if not)."""
        with self._lock:
            if self.since is None:
                return None
            away, failures = time.monotonic() - self.since, self.failures
            self.since, self.failures = None, 0
        self.logger.info(
            "%s%s back after %.1f s (%d failed attempts)",
            self._prefix(),
            self.what,
            away,
            failures,
            extra={"outage": self.what, "state": "back", "away_seconds": round(away, 3)},
        )
        return away


class RateLimited:
    """Log a recurring failure with its traceback at most once per `seconds` (then a count)."""

    def __init__(self, logger: logging.Logger, seconds: float = TRACEBACK_SECONDS) -> None:
        self.logger = logger
        self.seconds = seconds
        self._last: dict[str, float] = {}
        self._skipped: dict[str, int] = {}
        self._lock = threading.Lock()

    def exception(self, key: str, message: str, *args: object, **kwargs: Any) -> None:
        """`logger.exception(message)` unless `key` was logged less than `seconds` ago."""
        now = time.monotonic()
        with self._lock:
            if now - self._last.get(key, -self.seconds) < self.seconds:
                self._skipped[key] = self._skipped.get(key, 0) + 1
                return
            self._last[key] = now
            skipped = self._skipped.pop(key, 0)
        if skipped:
            message = f"{message} ({skipped} more like it since the last report)"
        self.logger.exception(message, *args, **kwargs)
