"""Stop with exit status 78 (EX_CONFIG) on a configuration error, so systemd does not restart.

The units in deploy/ say `RestartPreventExitStatus=78`: a process that cannot start because of
its settings (an unreadable SECRET_KEY_FILE, `HSTS_SECONDS=1 # comment`) would fail the same way
on every restart, so it stays stopped, with the reason as the last line of its log.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from django.core.exceptions import ImproperlyConfigured

EX_CONFIG = 78


@contextmanager
def exit_on_config_error() -> Iterator[None]:
    """Turn ImproperlyConfigured into one clear line on stderr and exit status 78."""
    try:
        yield
    except ImproperlyConfigured as exc:
        print(f"Skillscope configuration error: {exc}", file=sys.stderr)
        raise SystemExit(EX_CONFIG) from None
