"""Skillscope's settings as a process started with a given environment would read them.

`settings_under(env)` runs webapp/settings.py afresh in this process, with exactly `env` as the
environment while it runs, and returns the names it set. The file is the one every process
imports at start; running it in place costs milliseconds where a new interpreter that sets
Django up costs more than a second of CPU. A setting that cannot be read raises as it would at
start-up (ImproperlyConfigured and its message).
"""

from __future__ import annotations

import os
import runpy
from collections.abc import Mapping
from typing import Any
from unittest import mock

from tests.support.paths import REPO

__all__ = ["settings_under"]


def settings_under(env: Mapping[str, str]) -> dict[str, Any]:
    """The settings module's names and values, read under `env` (and nothing else)."""
    with mock.patch.dict(os.environ, env, clear=True):
        return runpy.run_path(str(REPO / "webapp" / "settings.py"))
