#!/usr/bin/env bash
# The whole test suite against the newest versions pyproject.toml allows, in a virtual environment
# of its own (.venv-newest), so an upstream release that breaks something is seen before the lock
# moves to it (then scripts/lock.sh moves it). It says which packages differ from the lock, then
# runs what scripts/test.sh runs. Arguments go to pytest, as with scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
export SKILLSCOPE_VENV=.venv-newest SKILLSCOPE_UNLOCKED=1
exec scripts/test.sh "$@"
