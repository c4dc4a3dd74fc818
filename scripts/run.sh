#!/usr/bin/env bash
# Set up everything and start Skillscope with the embedded defaults (SQLite, in-memory channel
# layer, one process; the offline demo model unless ANTHROPIC_API_KEY is set), listening on
# SKILLSCOPE_ADDR (default 127.0.0.1:8000).
#
# Settings come from the environment. A `.env` file next to this repository's README (see
# .env.example) is read too, by systemd's EnvironmentFile= rules; a variable already set in the
# environment wins over the file.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -f .env ] && [ -z "${SKILLSCOPE_DOTENV_READ:-}" ]; then
  echo "==> Reading settings from .env (variables set in the environment win)"
  export SKILLSCOPE_DOTENV_READ=1
  exec "${PYTHON:-python3}" -m webapp.envfile --defaults .env -- scripts/run.sh "$@"
fi

scripts/sandbox-check.sh
scripts/setup.sh
.venv/bin/python manage.py bootstrap
url="$(.venv/bin/python -m webapp.publicurl)"
echo "==> Starting Skillscope on ${url}/  (Ctrl+C stops it)"
# 20 s to accept a websocket, not 5: tabs connecting at once (after a restart) are accepted
# together, after a few seconds, and past the limit daphne resets them all (docs/deploy.md,
# "Bursts of tabs are accepted"; 20 s is the most runserver allows, its connect limit).
exec .venv/bin/python manage.py runserver "${SKILLSCOPE_ADDR:-127.0.0.1:8000}" \
  --websocket_handshake_timeout 20
