#!/usr/bin/env bash
# Set up everything and start Skillscope on http://127.0.0.1:8000 with the embedded defaults
# (SQLite, in-memory channel layer, one process; the offline demo model unless ANTHROPIC_API_KEY is set).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
.venv/bin/python manage.py bootstrap
echo "==> Starting Skillscope on http://127.0.0.1:8000  (Ctrl+C stops it)"
exec .venv/bin/python manage.py runserver "${SKILLSCOPE_ADDR:-127.0.0.1:8000}"
