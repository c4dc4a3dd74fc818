#!/usr/bin/env bash
# Shared by run.sh and test.sh: a virtual environment with exactly the locked dependencies, and
# (for run.sh) the app's database migrated.
# Usage: scripts/setup.sh [extra]   (extra: "test" installs the test dependencies too)
#
# What is installed comes from requirements/app.txt or requirements/test.txt: every package pinned
# with its hashes, so a fresh machine gets what CI tested. scripts/lock.sh refreshes them;
# scripts/test-newest.sh tries the newest versions pyproject.toml allows in a venv of its own.
# SKILLSCOPE_VENV names the virtual environment (default .venv); SKILLSCOPE_UNLOCKED=1 installs
# the newest allowed versions instead of the lock (only test-newest.sh sets it).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
VENV="${SKILLSCOPE_VENV:-.venv}"
extra="${1:-app}"
lock="requirements/${extra}.txt"
if [ ! -f "$lock" ]; then
  echo "scripts/setup.sh: no lock file $lock (the argument is 'test' or nothing)" >&2
  exit 2
fi

# Node.js programs the tests start, each installed exactly as its package-lock.json locks it:
# tests/oidc, a real OpenID Connect provider (panva's oidc-provider) for the sign-in tests;
# tests/mcp_everything, the MCP project's reference server (@modelcontextprotocol/server-everything)
# for the MCP tests. They install in the background while Python's packages do (both mostly wait
# on the network), and the script waits for them before it ends.
node_jobs=()
if [ "$extra" = "test" ]; then
  if command -v npm >/dev/null 2>&1; then
    for folder in tests/oidc tests/mcp_everything; do
      if [ ! -d "$folder/node_modules" ] || [ "$folder/package-lock.json" -nt "$folder/node_modules" ]; then
        echo "==> Installing the locked Node.js packages of $folder (npm ci)"
        ( npm ci --prefix "$folder" --no-audit --no-fund --loglevel=error && touch "$folder/node_modules" ) &
        node_jobs+=("$!")
      fi
    done
  else
    echo "==> Node.js (npm) is missing: the sign-in tests against a real OIDC provider and the MCP tests against server-everything will be skipped" >&2
  fi
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "==> Creating the virtual environment in $VENV"
  "$PYTHON" -m venv "$VENV"
fi

stamp="$VENV/.installed-${extra}"
if [ -n "${SKILLSCOPE_UNLOCKED:-}" ]; then
  echo "==> Installing the newest versions pyproject.toml allows (not the lock)"
  spec="."
  [ "$extra" = "test" ] && spec=".[test]"
  # Only the dependencies: the project itself is run from this folder, never installed.
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet --upgrade --upgrade-strategy eager \
    -r <("$VENV/bin/python" - "$extra" <<'PY'
import sys, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
deps = list(project["dependencies"])
if sys.argv[1] == "test":
    deps += project["optional-dependencies"]["test"]
print("\n".join(deps))
PY
)
  rm -f "$VENV"/.installed-*
  echo "==> Packages whose installed version differs from $lock"
  "$VENV/bin/python" scripts/lock_diff.py "$lock"
elif [ ! -f "$stamp" ] || [ "$lock" -nt "$stamp" ]; then
  echo "==> Installing the locked dependencies ($lock)"
  # --require-hashes: a package whose file differs from the one locked is refused, not installed.
  # uv installs the lock (itself pinned with its hashes in requirements/uv.txt): on a fresh
  # machine it takes 6 s where pip takes 70 (2 cores, 2026-12-06). uv reads no pip.conf, so a
  # machine that reaches packages only through pip's own configuration falls back to pip.
  "$VENV/bin/python" -m pip install --quiet --require-hashes --no-deps -r requirements/uv.txt
  # No --compile-bytecode: it took 14 s and saved the tests less (2 cores, 2026-12-06).
  if ! "$VENV/bin/uv" pip install --quiet --require-hashes --no-deps \
    --python "$VENV/bin/python" -r "$lock"; then
    echo "==> uv could not install $lock; installing it with pip instead" >&2
    "$VENV/bin/python" -m pip install --quiet --require-hashes --no-deps -r "$lock"
  fi
  touch "$stamp"
fi

for job in "${node_jobs[@]}"; do
  if ! wait "$job"; then
    echo "scripts/setup.sh: npm ci failed (above); the Node.js programs the tests start are missing" >&2
    exit 1
  fi
done

# The app's own database, for run.sh; the tests make their own databases (pytest-django, and
# each server a test starts migrates its own).
if [ "$extra" != "test" ]; then
  echo "==> Applying database migrations"
  "$VENV/bin/python" manage.py migrate --noinput --verbosity 0
fi
