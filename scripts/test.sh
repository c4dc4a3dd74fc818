#!/usr/bin/env bash
# Set up everything and run the whole test suite: lint, unit, consumer, browser and multi-process tests.
# System packages the tests drive for real (Chromium, bubblewrap, redis-server, PostgreSQL) come from Debian.
# Each phase prints its wall and CPU time. PYTEST_WORKERS sets pytest-xdist's worker count (0 runs
# the tests in this process). The default, 3 on a 2-core machine, is measured: the multi-process
# tests spend much of their time waiting (a Redis outage, a run queued with no worker), and a third
# worker fills those waits (2026-12-01: 542 s of tests against 581 s with 2; 2026-12-06: four
# workers took 594 s against 601 s with three, the cores being the limit).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${SKILLSCOPE_VENV:-.venv}"

TIMEFORMAT="    (%R s wall, %U s user, %S s sys)"

echo "==> System packages"
time scripts/system-packages.sh
time scripts/setup.sh test

# The project's own modules compiled once, before three test workers would each compile them.
"$VENV"/bin/python -m compileall -q -j 0 webapp skills_app tests bench manage.py >/dev/null

echo "==> Lint (ruff)"
time {
  "$VENV"/bin/ruff format --check --quiet webapp skills_app tests bench typings manage.py
  "$VENV"/bin/ruff check --quiet webapp skills_app tests bench typings manage.py
}

# The type check runs beside the tests (its 40 s of one core fit in the tests' waits); its
# report is printed after theirs, and either failing fails the command. It starts a minute in:
# the three workers' first ~45 s (importing and collecting 4,000 tests) keep both cores busy and
# have no waits to fill (2026-12-06: the first test started 47 s after pytest did).
types_log="$(mktemp)"
trap 'rm -f "$types_log"' EXIT
( sleep 60 && time "$VENV"/bin/mypy ) >"$types_log" 2>&1 &
types_pid=$!

echo "==> Tests"
# loadgroup: the multi-process tests stay on one worker, the browser tests on one (tests/conftest.py);
# every other test goes to whichever worker is free.
status=0
time "$VENV"/bin/python -m pytest -n "${PYTEST_WORKERS:-3}" --dist loadgroup "$@" || status=$?

echo "==> Types (mypy --strict on skills_app and webapp; config in pyproject.toml)"
types=0
wait "$types_pid" || types=$?
cat "$types_log"
if [ "$status" -eq 0 ] && [ "$types" -ne 0 ]; then
  status=$types
fi
exit "$status"
