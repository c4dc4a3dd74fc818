"""Typed readers of the environment for `webapp/settings.py`: each fails loudly.

A value that cannot be read raises ImproperlyConfigured naming the variable, what was wrong and
what to write instead, so a typo stops start-up rather than silently changing behaviour. Unset
and empty mean the default (a copied `.env.example` changes nothing).
"""

from __future__ import annotations

import os
from decimal import Decimal, InvalidOperation
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def env_str(name: str, default: str = "") -> str:
    """NAME, or the default when unset or empty (so a copied .env.example changes nothing)."""
    return os.environ.get(name) or default


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(
        f"{name}={raw!r} is not a boolean: use true/false, yes/no, on/off or 1/0"
    )


def env_bool_or_auto(name: str) -> bool | None:
    """NAME as a boolean, or None when unset, empty or `auto` (the setting's own rule decides)."""
    raw = os.environ.get(name)
    if raw is None or raw.strip().lower() in ("", "auto"):
        return None
    try:
        return env_bool(name, False)
    except ImproperlyConfigured:
        raise ImproperlyConfigured(
            f"{name}={raw!r} is not a boolean: use true/false, yes/no, on/off or 1/0, or leave "
            "it empty (or write auto) for the default rule"
        ) from None


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} is below the minimum of {minimum}")
    return value


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number") from None


def env_list(name: str, default: list[str], *, sep: str = ",") -> list[str]:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    return [part.strip() for part in raw.split(sep) if part.strip()]


def env_secret(name: str, default: str = "") -> str:
    """Read NAME, or the file named by NAME_FILE (for container secrets)."""
    path = os.environ.get(f"{name}_FILE")
    if path:
        try:
            return Path(path).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={path!r} cannot be read: {exc}") from None
    return os.environ.get(name) or default


def env_choice(name: str, default: str, choices: tuple[str, ...], *, upper: bool = False) -> str:
    value = (os.environ.get(name) or default).strip()
    if upper:
        value = value.upper()
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={value!r} must be one of: {', '.join(choices)}")
    return value


def env_usd(name: str) -> Decimal | None:
    """A dollar amount (e.g. 5 or 12.50), or None when unset or empty (no limit)."""
    raw = env_str(name).strip().lstrip("$")
    if not raw:
        return None
    try:
        value = Decimal(raw)
    except InvalidOperation:
        raise ImproperlyConfigured(
            f"{name}={raw!r} is not an amount in dollars, e.g. 5 or 12.50"
        ) from None
    if value < 0 or not value.is_finite():
        raise ImproperlyConfigured(f"{name}={raw!r} must be 0 or more (empty: no limit)")
    return value


def check_heartbeat(beat_name: str, beat: float, stale_name: str, stale: float) -> None:
    if beat <= 0 or stale < 2 * beat:
        raise ImproperlyConfigured(
            f"{beat_name}={beat} and {stale_name}={stale}: the heartbeat must be positive and "
            "the stale limit at least twice the heartbeat, or live runs would be taken for dead ones."
        )
