"""A registered server's stored secrets (env and header values) as the words to look for, and
masking them in a JSON-like value: what keeps them out of calls (`skills_app.mcp.filter`) and out
of the results the model reads (`tool.McpTool`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# Shorter values are not looked for: they would match ordinary words.
SECRET_MIN_CHARS = 8
MASK = "[stored secret]"


def secret_words(values: Iterable[object]) -> tuple[str, ...]:
    """Each value and each word of it (the token of "Bearer <token>"), longest first."""
    found: set[str] = set()
    for value in values:
        if not isinstance(value, str):
            continue
        for piece in (value.strip(), *value.split()):
            if len(piece) >= SECRET_MIN_CHARS:
                found.add(piece)
    return tuple(sorted(found, key=lambda s: (-len(s), s)))


def mask(value: Any, secrets: Iterable[str]) -> Any:
    """`value` with every secret in its strings replaced by MASK (keys stay)."""
    secrets = tuple(secrets)
    if not secrets:
        return value
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, MASK)
        return value
    if isinstance(value, dict):
        return {k: mask(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mask(v, secrets) for v in value]
    return value
