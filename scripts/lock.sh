#!/usr/bin/env bash
# Refresh the lock files from pyproject.toml's ranges: requirements/test.txt (the app and its
# tests), requirements/app.txt (the app alone, held to the same versions) and requirements/uv.txt
# (the uv that scripts/setup.sh installs them with). Every package is
# pinned with the hashes of its files. Run it after changing a range in pyproject.toml, or to move
# the lock to newer releases once scripts/test-newest.sh has passed with them; commit the three files.
# Extra arguments go to `uv pip compile`, e.g. --upgrade-package anthropic.
set -euo pipefail
cd "$(dirname "$0")/.."

UV_VERSION="0.13.9"
tools=".venv-lock"
if [ ! -x "$tools/bin/uv" ] || ! "$tools/bin/uv" --version | grep -q " $UV_VERSION"; then
  echo "==> Installing uv $UV_VERSION in $tools"
  "${PYTHON:-python3}" -m venv "$tools"
  "$tools/bin/python" -m pip install --quiet "uv==$UV_VERSION"
fi

compile=("$tools/bin/uv" pip compile pyproject.toml --quiet --generate-hashes --universal
  --python-version 3.11 --custom-compile-command scripts/lock.sh)
"${compile[@]}" --extra test -o requirements/test.txt "$@"
# The app's lock takes the test lock's versions, so both install the same release of a package.
"${compile[@]}" --constraint requirements/test.txt -o requirements/app.txt "$@"
# uv itself, which scripts/setup.sh installs the locks with, pinned with its hashes.
"$tools/bin/uv" pip compile --quiet --generate-hashes --universal --python-version 3.11 \
  --custom-compile-command scripts/lock.sh -o requirements/uv.txt - <<<"uv==$UV_VERSION"
echo "==> requirements/test.txt, app.txt and uv.txt refreshed; commit all three"
