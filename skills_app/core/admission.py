"""A model call the person's policy refuses before it is sent: a budget reached, a model not
offered. The run ends there with the reason as a plain notice; its history stays as it was."""

from __future__ import annotations


class CallRefused(Exception):
    """Raised by the ports before a model call; `message` says why and what the person can do."""

    def __init__(self, message: str, code: str = "budget") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


__all__ = ["CallRefused"]
