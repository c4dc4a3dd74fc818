"""Secrets kept encrypted at rest: Fernet under keys derived from SECRET_KEY, one key per purpose.

Each purpose ("mcp-oauth", "mcp-server-secret") gets its own key, sha256 of "PURPOSE:SECRET_KEY",
and the keys of SECRET_KEY_FALLBACKS still decrypt after a rotation (new ciphertext is always
made under the current key; `manage.py mcp reseal` re-encrypts what is stored). Ciphertext that
no configured key opens reads as "" (as if nothing had been stored), and the log says so once.

`SealedValuesField` keeps a JSON object whose keys stay readable in the database (the env keys
and header names: no secret, and what lists show) and whose values are ciphertext.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import logging
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.db import models

log = logging.getLogger(__name__)

SERVER_SECRETS = "mcp-server-secret"
_warned: set[str] = set()


@functools.lru_cache(maxsize=16)
def _fernet_for(purpose: str, keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet(
        [
            Fernet(base64.urlsafe_b64encode(hashlib.sha256(f"{purpose}:{k}".encode()).digest()))
            for k in keys
        ]
    )


def sealing_keys() -> tuple[str, ...]:
    """SECRET_KEY, then each fallback key: what opens a sealed value now."""
    return (str(settings.SECRET_KEY), *map(str, getattr(settings, "SECRET_KEY_FALLBACKS", [])))


def fernet(purpose: str) -> MultiFernet:
    """The purpose's Fernet under the current SECRET_KEY, then each fallback key."""
    return _fernet_for(purpose, sealing_keys())


def seal(text: str, purpose: str) -> bytes:
    """`text` encrypted for `purpose` (b"" for "")."""
    return fernet(purpose).encrypt(text.encode()) if text else b""


def unseal(blob: bytes | memoryview, purpose: str) -> str:
    """What `seal` made, or "" when no configured key opens it."""
    data = bytes(blob)
    if not data:
        return ""
    try:
        return fernet(purpose).decrypt(data).decode()
    except InvalidToken:
        if purpose not in _warned:  # once a process: the filter reads every value at each call
            _warned.add(purpose)
            log.warning(
                "A stored %s opens under no configured key (SECRET_KEY, SECRET_KEY_FALLBACKS) "
                "and reads as empty; `manage.py mcp reseal` before dropping an old key.",
                purpose,
            )
        return ""


def seal_values(values: dict[str, Any], purpose: str = SERVER_SECRETS) -> dict[str, str]:
    """Each value (text) encrypted, as text; the keys as they are."""
    return {key: seal(str(value), purpose).decode("ascii") for key, value in values.items()}


def open_values(values: dict[str, Any], purpose: str = SERVER_SECRETS) -> dict[str, str]:
    """What `seal_values` made, opened."""
    return {key: unseal(str(value).encode(), purpose) for key, value in values.items()}


class SealedValuesField(models.JSONField):
    """A JSON object of text values stored with each value encrypted (`seal_values`).

    Reading the field (an instance, `values_list`) gives the plain values; only the database
    holds ciphertext. Ciphertext differs at each save, so the field is not for lookups by value.
    """

    def get_prep_value(self, value: Any) -> Any:
        if isinstance(value, dict):
            value = seal_values(value)
        return super().get_prep_value(value)

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        value = super().from_db_value(value, expression, connection)
        return open_values(value) if isinstance(value, dict) else value
