"""The error every tool raises for a call the model or user can fix."""

from __future__ import annotations


class ToolError(Exception):
    """A tool call the model or user got wrong; the message says what is wrong and what to do."""
