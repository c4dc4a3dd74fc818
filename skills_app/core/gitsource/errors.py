from __future__ import annotations


class GitSourceError(Exception):
    """A source that cannot be used or synced; `.message` says what is wrong and what to do."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
