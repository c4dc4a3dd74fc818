#!/usr/bin/env python
"""Django's command-line utility for Skillscope."""

from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    from django.core.management import execute_from_command_line

    from webapp.configerror import exit_on_config_error

    with exit_on_config_error():
        execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
