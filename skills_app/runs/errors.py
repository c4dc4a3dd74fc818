"""Why a run cannot start, in words for the person who asked for it."""

from __future__ import annotations


class RunError(Exception):
    """A run cannot start; the message says why and what to do.

    A limit reached (`policy.limits`) is one too, raised by `start_run`, so whatever starts runs
    on someone's behalf (the queue's `send_next`) shows every refusal in its own words without
    knowing where it came from.
    """


class LimitRefusal(RunError):
    """One of the person's limits (`policy.limits`) stands in the way; the message says which."""
