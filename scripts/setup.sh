#!/usr/bin/env bash
# Shared by run.sh and test.sh: a virtual environment with the project installed, and migrations applied.
# Usage: scripts/setup.sh [extra]   (extra: "test" installs the test dependencies too)
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "==> Creating the virtual environment in .venv"
  "$PYTHON" -m venv .venv
fi

stamp=".venv/.installed-${1:-app}"
# Reinstall only when pyproject.toml changed since the last install.
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "==> Installing Skillscope and its dependencies"
  .venv/bin/python -m pip install --quiet --upgrade pip
  if [ "${1:-}" = "test" ]; then
    .venv/bin/python -m pip install --quiet -e '.[test]'
  else
    .venv/bin/python -m pip install --quiet -e .
  fi
  touch "$stamp"
fi

if [ "${1:-}" = "test" ]; then
  # The sign-in tests start a real OpenID Connect provider (panva's oidc-provider) with Node.js,
  # installed exactly as locked in tests/oidc/package-lock.json.
  if command -v npm >/dev/null 2>&1; then
    if [ ! -d tests/oidc/node_modules ] || [ tests/oidc/package-lock.json -nt tests/oidc/node_modules ]; then
      echo "==> Installing the test OpenID Connect provider (npm ci in tests/oidc)"
      npm ci --prefix tests/oidc --no-audit --no-fund --loglevel=error
      touch tests/oidc/node_modules
    fi
  else
    echo "==> Node.js (npm) is missing: the sign-in tests against a real OIDC provider will be skipped" >&2
  fi
fi

echo "==> Applying database migrations"
.venv/bin/python manage.py migrate --noinput --verbosity 0
