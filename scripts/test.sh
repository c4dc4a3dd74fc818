#!/usr/bin/env bash
# Set up everything and run the whole test suite: lint, unit, consumer, browser and multi-process tests.
# System packages the tests drive for real (Chromium, bubblewrap, redis-server, PostgreSQL) come from Debian.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/system-packages.sh
scripts/setup.sh test

echo "==> Lint (ruff)"
.venv/bin/ruff format --check --quiet webapp skills_app tests bench typings manage.py
.venv/bin/ruff check --quiet webapp skills_app tests bench typings manage.py

echo "==> Types (mypy --strict on skills_app and webapp; config in pyproject.toml)"
.venv/bin/mypy

echo "==> Tests"
exec .venv/bin/python -m pytest "$@"
